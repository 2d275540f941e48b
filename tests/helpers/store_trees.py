"""A run directory's files as a dict (path -> bytes), written to and read from a folder."""

RUN = {
    "run-configs/execution.json": b'{"schema_version": 1}\n',
    "run-configs/compilation.json": b'{"schema_version": 1, "module_dir_paths": {}}\n',
    "modules/resnet18-inductor/module_info.json": b'{"schema_version": 1}\n',
    "modules/resnet18-inductor/code/kernel.py": b"def k():\n    return 1\n",
    "modules/gpt2-eager/module_info.json": b'{"schema_version": 1, "x": 2}\n',
    "results/c2-standard-16-0.json": b'{"schema_version": 1, "benchmarks": []}\n',
    "results/docs/bench_resnet18_20261129T000000Z_0123abcd.json": b'{"schema_version": 1}\n',
    "comparison.json": b'{"schema_version": 1, "rows": []}\n',
    "empty.txt": b"",
}


def write_tree(folder, files):
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def read_tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}
