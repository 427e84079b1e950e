"""`mcpbench compare`: the command over `runs`, `judge` and `chart`; numpy and matplotlib load inside it."""

from dataclasses import dataclass
from pathlib import Path

import click

from mcpbench.ci.outputs import check_ci_outputs, ci_options, write_ci_outputs
from mcpbench.cliutil import FiniteFloatRange, check_output, map_errors, positive_duration

COMPARE_JSON, COMPARE_PNG = "compare.json", "compare.png"


def _share(text: str) -> float:
    """`--min-change`: `3%` or `0.03`."""
    try:
        value = float(text[:-1]) / 100.0 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise click.UsageError(f"--min-change {text!r}: expected a share like 3% or 0.03") from None
    if not 0.0 <= value < 1.0:
        raise click.UsageError(f"--min-change {text!r}: expected a share from 0% to under 100%")
    return value


@click.command("compare")
@click.argument("base", required=False, metavar="BASE")
@click.argument("new", required=False, metavar="NEW")
@click.option("--base", "bases", multiple=True, metavar="FOLDER|GLOB", help="A base run folder or a quoted glob of them (repeatable): repeated runs.")
@click.option("--new", "news", multiple=True, metavar="FOLDER|GLOB", help="A new run folder or a quoted glob of them (repeatable).")
@click.option("--confidence", type=FiniteFloatRange(0.5, 0.999), default=0.95, show_default=True,
              help="The confidence of every interval and test.")
@click.option("--min-change", default="3%", show_default=True, metavar="SHARE",
              help="A quantile changed by less than this share of the base's is within noise, whatever its interval.")
@click.option("--fail-on", multiple=True, metavar="RULE",
              help="Exit 1 when a step got worse past RULE and not by noise: p95>+10%, p99>+5ms, errors>+1pp (repeatable). "
                   "A quantile rule needs repeated runs: one run a side that breaks it is inconclusive (exit 2).")
@click.option("--trim", default="0s", show_default=True, metavar="DURATION",
              help="Leave out the first and last DURATION of every run (warm-up, wind-down; runs side by side start apart).")
@click.option("--out", type=click.Path(file_okay=False), help="Where compare.json and compare.png go (default: results/<time>-compare).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison's JSON instead of the table.")
@ci_options
@map_errors
def compare(**given):
    """Compare load runs: per step, is NEW slower or faster than BASE, or is the change noise?

    BASE and NEW are `mcpbench load` folders; for repeated runs give folders that hold runs, quoted
    globs, or --base/--new several times. Per step: p50, p95 and p99 of each side with intervals
    (Student's t over repeated runs, or over stretches of time of one run a side, paired when the
    two ran side by side), their change with its interval, each
    side's error ratio and a two-proportion test, and a verdict: slower, faster or within noise.

    One run a side: the verdicts compare these two runs, whose intervals cannot hold what sets two
    server processes of one build apart for a whole run (measured here: up to +291 % on a 3 ms call).
    So a --fail-on rule on a quantile fails only over repeated runs (three or more in all: the
    spread between runs is measured); one run a side that breaks it is inconclusive (exit 2).

    Exit status: 0 (also when slower: only --fail-on fails); 1 when a --fail-on rule is broken
    beyond noise; 2 for a folder that is not a load run, a rule that does not parse, no step in
    common, too few samples to judge any step, or a quantile rule broken by one run a side
    (inconclusive).

    Example: mcpbench compare results/main-run results/pr-run --fail-on 'p95>+10%' --fail-on 'errors>+1pp'
    """
    _compare(CompareArgs(**given))


@dataclass(frozen=True, kw_only=True)
class CompareArgs:
    """`compare`'s options, as given (click's names and values)."""

    base: str | None
    new: str | None
    bases: tuple[str, ...]
    news: tuple[str, ...]
    confidence: float
    min_change: str
    fail_on: tuple[str, ...]
    trim: str
    out: str | None
    as_json: bool
    junit_xml: str | None
    summary_md: str | None


def _compare(args: CompareArgs) -> None:
    import orjson

    from mcpbench.compare.chart import draw
    from mcpbench.compare.judge import compare as judge
    from mcpbench.compare.judge import render, suites, to_json
    from mcpbench.compare.runs import CompareError, read_sides
    from mcpbench.compare.thresholds import parse_rule
    from mcpbench.files.outputs import new_run_folder, write_atomic

    check_ci_outputs(args.junit_xml, args.summary_md)
    check_output(args.out, "--out", folder=True)
    share = _share(args.min_change)
    trim_s = positive_duration(args.trim, "--trim", zero=True)
    rules = [parse_rule(text) for text in args.fail_on]
    base_paths, new_paths = [p for p in (args.base, *args.bases) if p], [p for p in (args.new, *args.news) if p]
    if not base_paths or not new_paths:
        raise click.UsageError("give BASE and NEW run folders (or --base and --new)")
    comparison = judge(*read_sides([base_paths, new_paths], trim_s), confidence=args.confidence, min_change=share,
                       rules=rules, trim=trim_s)
    comparison.check_common()
    data = to_json(comparison, comparison.exit_code)
    folder = Path(args.out) if args.out else new_run_folder(Path("results"), "compare")
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / COMPARE_JSON, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    draw(data, folder / COMPARE_PNG)
    junit, rows = suites(comparison)
    write_ci_outputs(junit, "mcpbench compare", args.junit_xml, None)
    write_ci_outputs(rows, "mcpbench compare", None, args.summary_md)
    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() if args.as_json else render(comparison))
    click.echo(f"mcpbench: wrote {folder / COMPARE_JSON} and {COMPARE_PNG}", err=args.as_json)
    if why := comparison.no_verdict():
        raise CompareError(why)
    raise SystemExit(comparison.exit_code)
