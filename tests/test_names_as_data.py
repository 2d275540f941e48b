"""Names are data (issue 16, part 1): an adopter's names may hold any printable character and show
literally in the comment, the dashboard, the plots and the console; files are named by their slug;
control characters and line breaks are refused when the suite is loaded."""

import dataclasses
import html
import json
import re
from html.parser import HTMLParser

import pytest

from benchtrail.cli import main
from benchtrail.markup import code_span, md_text, mpl_text
from benchtrail.results.io import load_results, write_documents, write_results
from benchtrail.suite.names import NAME_RULE, SAFE_NAME, slug
from tests.helpers.records import record, results

#: Printable names that are markup, paths or long somewhere.
HOSTILE = ["a|b", "x`y", "``tick``", "<script>alert(1)</script>", "*bold* _it_ __b__", "../../etc",
           "a/b::c,d=e",
           "名前 🚀", "$\\notacommand$ [l](http://x) @all #1 &amp; ~~s~~", "%{y} %{customdata[0]}", "a\\|b\\",
           "n" * 300]
#: Device names of the same kind (one per hostile series, cycled).
DEVICES = ["dev|1 `x`", "../dev", "<b>GPU</b> *2*", "机器 1"]


def _hostile_records(scale: float):
    """Execution records named by ``HOSTILE``, on ``DEVICES``, ``scale`` times a base median of 100 µs."""
    return [dataclasses.replace(record(f"rc{i}", [scale * (100 + j % 5) for j in range(20)], name=name,
                                       content_hash="ab" * 32),
                                device_name=DEVICES[i % len(DEVICES)], module_name=f"{name}.cpu",
                                compile_config=f"cc {name[:20]}")
            for i, name in enumerate(HOSTILE)]


class _Tables(HTMLParser):
    """The text of every table cell of rendered HTML, by table and row; and every tag seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _unescaped_pipes(line: str) -> int:
    """Cell separators of a GFM table row: a ``|`` not preceded by a backslash."""
    return len(re.findall(r"(?<!\\)\|", line))


def _rendered(markdown: str) -> _Tables:
    from markdown_it import MarkdownIt  # rich's Markdown parser: CommonMark with GFM tables

    parser = _Tables()
    parser.feed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown))
    return parser


def test_compare_and_comment_show_hostile_names_literally_in_well_formed_tables(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    write_results(base, results(*_hostile_records(1.0)))
    write_results(head, results(*_hostile_records(1.5), commit="b" * 40))
    assert main(["compare", "--base", str(base), "--head", str(head), "--output",
                 str(tmp_path / "c.json")]) == 0
    comparison = json.loads((tmp_path / "c.json").read_text())
    assert sorted(r["name"] for r in comparison["rows"]) == sorted(HOSTILE)
    assert main(["comment", "--comparison", str(tmp_path / "c.json"), "--output-dir",
                 str(tmp_path / "out")]) == 0
    capsys.readouterr()
    for body in ((tmp_path / "out" / "comment.md").read_text(), (tmp_path / "out" / "full.md").read_text()):
        lines = body.splitlines()
        for i, line in enumerate(lines):  # every table row has its header's cells
            if line.startswith("|"):
                header = next(lines[j] for j in range(i, -1,
                                                      -1) if j == 0 or not lines[j - 1].startswith("|"))
                assert _unescaped_pipes(line) == _unescaped_pipes(header), line
        rendered = _rendered(body)
        assert not rendered.tags & {"script", "b", "em", "strong", "a", "del", "s"}, rendered.tags
        for table in rendered.tables:
            assert len({len(row) for row in table}) == 1  # header and rows: the same number of cells
        # every series regressed (unconfirmed: no re-check ran): the rows of the series tables, folded or not
        shown = {row[0] for table in rendered.tables if table[0][0] == "benchmark" for row in table[1:]}
        # several devices: a name not ending in its device is followed by it
        assert shown == {f"{n} · {DEVICES[i % len(DEVICES)]}" for i, n in enumerate(HOSTILE)}
        assert "12 regressions" in lines[0]


@pytest.mark.parametrize("text", [*HOSTILE, "`", " lead", "trail`", "`` both ``", "|", "\\"])
def test_markdown_helpers_render_to_the_text_itself(text):
    from markdown_it import MarkdownIt

    assert "\n" not in md_text(text) + code_span(text) + code_span(text, in_table=True)
    (table,) = _rendered(f"| h |\n|---|\n| {code_span(text, in_table=True)} |\n").tables
    assert table[1][0] == text
    (table,) = _rendered(f"| h |\n|---|\n| {md_text(text)} |\n").tables
    assert table[1][0] == " ".join(text.split())
    plain = MarkdownIt("commonmark").enable("strikethrough").render(md_text(text))
    assert html.unescape(re.sub(r"</?p>\n?", "", plain)) == " ".join(text.split())
    code = MarkdownIt("commonmark").render(code_span(text))
    assert html.unescape(re.sub(r"</?(p|code)>\n?", "", code)) == text


MPL_NAMES = [*HOSTILE, "$x$", "a$b", "\\$", "$\\frac{$"]


def test_matplotlib_shows_names_as_given_and_never_parses_mathtext(tmp_path):
    from matplotlib.text import Text

    from benchtrail.history.comparison_figures import ratios_figure
    from benchtrail.history.plots import save_figures

    for name in MPL_NAMES:  # matplotlib's own reading of the label: the name itself, no mathtext
        assert Text()._preprocess_math(mpl_text(name)) == (name, False), name
    # Unescaped, "$\\notacommand$" and "$\\frac{$" fail mathtext's parser when the figure is drawn.
    figure = ratios_figure(MPL_NAMES, [1.5] * len(MPL_NAMES), " ".join(MPL_NAMES[:3]))
    (path,) = save_figures({"r.png": figure}, tmp_path)
    assert path.stat().st_size > 1000


def test_a_long_name_is_shortened_in_the_middle_and_leaves_the_axes_their_room():
    import warnings

    from benchtrail.history.comparison_figures import ratios_figure
    from benchtrail.markup import MPL_LABEL_CHARS, MPL_TITLE_CHARS

    assert mpl_text("a" * 30 + "$" + "b" * 40, 11) == "aaaaa…bbbbb"
    assert mpl_text("$" + "x" * 20 + "$", 9) == "\\$xxx…xxx\\$" and mpl_text("short", 5) == "short"
    names = ["n" * 150 + "-inference-bs1", "resnet18.inductor.inference-bs1.c2-standard-16"]
    fig = ratios_figure(names, [1.5, 0.8], "t" * 200)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["n" * 30 + "…" + "n" * 15 + "-inference-bs1", names[1]]
    assert len(fig.axes[0].get_title()) == MPL_TITLE_CHARS and len(labels[0]) == MPL_LABEL_CHARS
    with warnings.catch_warnings():
        # "constrained_layout not applied because axes sizes collapsed to zero"
        warnings.simplefilter("error")
        fig.canvas.draw()
    assert fig.axes[0].get_position().width > 0.4  # the bars keep most of the 9-inch figure's width


def test_dashboard_page_escapes_names_in_titles_legend_and_hover(tmp_path):
    from benchtrail.history.dashboard import page_html
    from benchtrail.history.series import CommitRun, History, Point, Series

    commits = ["a" * 40, "b" * 40]
    series = tuple(Series(f"s{i}", name, "execution", "latency", "us", DEVICES[i % 4], ("smoke",), "eager",
                          "inference", tuple(Point(c, "r", 1, 10.0 + k, 1.0, 9.0, 12.0, 5, "ok", 9.5, 10.5)
                                             for k, c in enumerate(commits)))
                   for i, name in enumerate(HOSTILE))
    history = History("main", commits[-1], "store", tuple(CommitRun(c, "r", 1) for c in commits), series)
    page = page_html(history, "smoke", series, self_contained=False)
    assert "<script>alert" not in page and "<\\/script>alert" not in page
    figure = json.loads(re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{", page, re.S).group(1))
    named = [t for t in figure if t.get("mode") == "lines+markers"]
    assert [html.unescape(t["name"]).replace("&#36;", "$") for t in named] == HOSTILE
    assert {t["hovertemplate"] for t in named} == {named[0]["hovertemplate"]}  # no name in the template
    assert [html.unescape(t["text"][0]) for t in named] == HOSTILE


def test_slug_keeps_safe_names_and_makes_a_safe_distinct_segment_of_any_other(tmp_path):
    for name in ("resnet18.inductor.cpu", "c2-standard-16", "a_b-c.d", "x" * 80):
        assert slug(name) == name
    slugs = [slug(n) for n in (*HOSTILE, *DEVICES, "x" * 81, "..", ".", "-", "a..b")]
    assert len(set(slugs)) == len(slugs)
    for s in slugs:
        assert SAFE_NAME.match(s) and ".." not in s and len(s) <= 51, s
        path = tmp_path / "folder" / f"bench_{s}_x.json"
        assert path.resolve().parent == (tmp_path / "folder").resolve()
    assert slug("../../etc").startswith("etc-") and re.fullmatch("[0-9a-f]{10}", slug("名前 🚀"))


def test_bench_documents_of_hostile_names_are_written_inside_their_folder(tmp_path):
    folder = tmp_path / "docs"
    paths = write_documents(folder, results(*_hostile_records(1.0)))
    assert len(paths) == len(HOSTILE) and {p.parent for p in paths} == {folder}
    assert sorted(json.loads(p.read_text())["name"] for p in paths) == sorted(HOSTILE)


def test_console_progress_prints_names_with_brackets_as_given(capsys):
    from benchtrail.progress import progress_bar

    names = ["x[/]y", "[bold]z[/bold]", "a|b [red]", "\\[esc]"]
    with progress_bar("run dev[/]", len(names)) as report:
        for n in names:
            report(n, "failed")
    err = capsys.readouterr().err
    assert "run dev[/]" in err
    for n in names:
        assert n in err


# An adopter's project whose suite takes its names from names.json (rewritten per test; read at each call).
SUITE = '''
import json
from pathlib import Path

import torch

from benchtrail.suite.definitions import (Architecture, CompileConfig, CompileMode, DeviceSpec, ExecutionConfig,
                                          Model, ModuleGenerationConfig, RunConfig, Suite, Task)


def tiny():
    return torch.nn.Identity()


def generate():
    n = json.loads(Path(__file__).with_name("names.json").read_text())
    device = DeviceSpec("device-1", n["device"], "linux-x86_64", Architecture.CPU, "x86_64", threads=1)
    cc = CompileConfig("compile-1", n["compile"], CompileMode.EAGER)
    ec = ExecutionConfig("execution-1", n["execution"], Task.INFERENCE, processes=1, min_samples=2)
    model = Model("model-1", n["model"], (), "names_as_data_suite:tiny", ("4xf32",))
    module = ModuleGenerationConfig.build(model, cc, Architecture.CPU)
    case = RunConfig.build(module, ec, device, presets=(n["preset"],))
    return Suite((case,), (module,), (n["preset"],), ())
'''
SAFE = {"model": "m", "compile": "eager", "execution": "inference", "device": "laptop", "preset": "smoke"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("adopter")
    (root / "pyproject.toml").write_text('[tool.benchtrail]\nsuite = "names_as_data_suite:generate"\n')
    (root / "names_as_data_suite.py").write_text(SUITE)
    return root


def _export(project, monkeypatch, capsys, names, *args):
    (project / "names.json").write_text(json.dumps({**SAFE, **names}))
    monkeypatch.chdir(project)
    for f in project.glob("*.out.json"):
        f.unlink()
    try:
        code = main(["export", *args, "--benchmark-presets", names.get("preset", "smoke"), "--output",
                     "e.out.json"])
    except SystemExit as exc:  # the suite is read while the arguments are parsed: argparse exits
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("kind, name, code_point", [
    ("model", "a\nb", "U+000A"), ("device", "tab\there", "U+0009"), ("compile", "nul\x00", "U+0000"),
    ("execution", "del\x7f", "U+007F"), ("model", "sep\u2028x", "U+2028"), ("device", "c1\x85", "U+0085"),
    ("model", "cr\r", "U+000D"),
])
def test_a_name_with_a_control_character_is_refused_at_load_naming_it_and_the_rule(
        project, monkeypatch, capsys, kind, name, code_point):
    code, err = _export(project, monkeypatch, capsys, {kind: name}, "execution")
    assert code == 1
    err = " ".join(err.split())
    assert repr(name) in err and f"control character {code_point}" in err and NAME_RULE in err
    assert "names_as_data_suite:generate" in err and not (project / "e.out.json").exists()


@pytest.mark.parametrize("preset", ["../x", "a b", "a|b", "名前", "x..y"])
def test_a_preset_name_that_is_not_path_safe_is_refused_at_load(project, monkeypatch, capsys, preset):
    code, err = _export(project, monkeypatch, capsys, {"preset": preset}, "execution")
    assert code == 1
    err = " ".join(err.split())
    assert repr(preset) in err and "letters, digits, '.', '_' and '-'" in err and "PR trailer" in err


def test_an_export_with_a_control_character_in_a_name_is_refused_naming_the_file(project, monkeypatch, capsys,
                                                                                 tmp_path):
    assert _export(project, monkeypatch, capsys, {"model": "ok name"}, "compilation")[0] == 0
    text = (project / "e.out.json").read_text().replace("ok name", "bad\\nname")
    (tmp_path / "compilation.json").write_text(text)
    code = main(["compile", "--run-configs", str(tmp_path / "compilation.json"), "--output-dir",
                 str(tmp_path / "run"), "--device-name", "x"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1 and str(tmp_path / "compilation.json") in err and "'bad\\nname'" in err and NAME_RULE in err


@pytest.mark.parametrize("names", [
    {"model": "a|b <i>*x*</i>", "device": "../../dev|ice", "compile": "e/../ager", "execution": "inf::x,y=z"},
    {"model": "名前 🚀", "device": "机器 `1`", "compile": "c" * 300, "execution": "$x$"},
])
def test_the_compile_stage_names_files_by_slug_inside_the_run_directory(project, monkeypatch, capsys,
                                                                        tmp_path, names):
    assert _export(project, monkeypatch, capsys, names, "compilation")[0] == 0
    export = json.loads((project / "e.out.json").read_text())
    module = f"{names['model']}.{names['compile']}.cpu"
    assert list(export["module_dir_paths"].values()) == [f"modules/{slug(module)}"]
    run = tmp_path / "run"
    assert main(["compile", "--run-configs", str(project / "e.out.json"), "--output-dir", str(run),
                 "--device-name", names["device"]]) == 0
    written = sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file())
    assert written == [f"modules/{slug(module)}/compile-stats.json",
                       f"modules/{slug(module)}/module_info.json",
                       f"results/compilation-{slug(names['device'])}.json"]
    info = json.loads((run / f"modules/{slug(module)}/module_info.json").read_text())
    assert info["name"] == module and info["model"]["name"] == names["model"]
    assert load_results(run / f"results/compilation-{slug(names['device'])}.json").benchmarks == ()


def test_results_with_hostile_names_load_and_validate_and_a_control_character_does_not_validate(tmp_path):
    import jsonschema

    from tests.helpers.schemas import registry

    def valid(ref: str, value) -> bool:
        schema = {"$ref": f"results.schema.json#/$defs/{ref}"}
        return jsonschema.Draft202012Validator(schema, registry=registry()).is_valid(value)

    path = write_results(tmp_path / "r.json", results(*_hostile_records(1.0)))
    assert [b.name for b in load_results(path).benchmarks] == HOSTILE
    records = json.loads(path.read_text())["benchmarks"]
    assert all(valid("record", r) for r in records)
    for bad in ("a\nb", "x\x00", "\u2028", "\x9f", ""):
        assert not valid("record", {**records[0], "device_name": bad}), repr(bad)
        assert not valid("name", bad), repr(bad)
    for preset in ("../x", "a b", "a|b"):  # preset names stay path-safe
        assert not valid("presets", [preset]) and valid("presets", ["x86_64"])


@pytest.mark.parametrize("field, bad", [("name", "evil\n::error title=forged::all benchmarks passed"),
                                        ("device_name", "dev\x1b[2K"), ("module_name", "m\u2028n"),
                                        ("id", "rc\x00")])
def test_a_results_file_with_a_control_character_in_a_name_is_refused_at_load(tmp_path, capsys, field, bad):
    """A line break in a name would forge lines of the CI log (``::error``) or of the comment."""
    good = write_results(tmp_path / "good.json", results(*_hostile_records(1.0)))
    obj = json.loads(good.read_text())
    obj["benchmarks"][0][field] = bad
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj))
    out = tmp_path / "c.json"
    assert main(["compare", "--base", str(good), "--head", str(path), "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"results file {path}: benchmark" in err and (f"field {field} is {bad!r}: it holds the control "
                                                         "character") in err
    assert NAME_RULE in err and not out.exists()


def test_dollar_signs_in_names_never_become_github_math():
    assert md_text("$x$ $$y$$") == r"\$x\$ \$\$y\$\$"


def test_long_names_that_differ_in_their_parameters_keep_apart_in_plot_labels():
    from benchtrail.history.comparison_figures import ratios_figure

    names = [f"tinyproj.benchmarks.attention[seq={seq},heads=8,dtype=float16].inductor.inference.c2-standard-16"
             for seq in (64, 128)]
    labels = [t.get_text() for t in ratios_figure(names, [1.2, 0.9], "t").axes[0].get_yticklabels()]
    assert labels == ["…attention[seq=64,heads=8,dtyp…ctor.inference.c2-standard-16",
                      "…attention[seq=128,heads=8,dty…ctor.inference.c2-standard-16"]
