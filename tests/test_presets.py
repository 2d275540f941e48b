import pytest

from benchtrail.errors import UserError
from benchtrail.suite.presets import resolve_presets, split_presets

KNOWN = ("x86_64", "cuda", "comp-stats", "smoke")
META = {"default": ("x86_64", "cuda", "comp-stats")}


def test_split_accepts_commas_spaces_and_trailing_comma():
    assert split_presets("x86_64, CUDA comp-stats,") == ["x86_64", "cuda", "comp-stats"]


def test_meta_preset_expands_in_order_without_duplicates():
    assert resolve_presets(["cuda", "default"], KNOWN, META) == ("cuda", "x86_64", "comp-stats")


def test_unknown_preset_lists_valid_ones_and_suggests_a_close_match():
    with pytest.raises(UserError) as err:
        resolve_presets(["x86-64"], KNOWN, META)
    message = str(err.value)
    assert "'x86-64'" in message
    assert "comp-stats, cuda, smoke, x86_64, default" in message
    assert "Did you mean 'x86_64'?" in message


def test_empty_preset_list_is_an_error():
    with pytest.raises(UserError, match="no benchmark preset given"):
        resolve_presets(split_presets(" , "), KNOWN, META)


def test_version_flag_prints_the_package_version(capsys):
    from benchtrail import __version__
    from benchtrail.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"benchtrail {__version__}\n"
