"""``benchtrail``'s command line run in-process: its exit code and what it printed (pytest's ``capsys``)."""

from benchtrail.cli import main


def run_cli(capsys, *args):
    code = main(list(map(str, args)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err

