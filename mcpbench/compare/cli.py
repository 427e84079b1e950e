"""`mcpbench compare`: the command over `runs`, `judge` and `chart`; numpy and matplotlib load inside it."""

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
def compare(base, new, bases, news, confidence, min_change, fail_on, trim, out, as_json, junit_xml, summary_md):
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
    from mcpbench.compare.judge import NO_BUILD_VERDICT
    from mcpbench.compare.judge import compare as judge
    from mcpbench.compare.judge import render, suites, to_json
    from mcpbench.compare.runs import CompareError, read_sides
    from mcpbench.compare.thresholds import parse_rule
    from mcpbench.outputs import new_run_folder, write_atomic

    check_ci_outputs(junit_xml, summary_md)
    check_output(out, "--out", folder=True)
    share = _share(min_change)
    trim_s = positive_duration(trim, "--trim", zero=True)
    rules = [parse_rule(text) for text in fail_on]
    base_paths, new_paths = [p for p in (base, *bases) if p], [p for p in (new, *news) if p]
    if not base_paths or not new_paths:
        raise click.UsageError("give BASE and NEW run folders (or --base and --new)")
    comparison = judge(*read_sides([base_paths, new_paths], trim_s), confidence=confidence, min_change=share, rules=rules, trim=trim_s)
    if not comparison.steps:
        raise CompareError(f"no step in common: base has {', '.join(comparison.only_base) or 'none'}; new has {', '.join(comparison.only_new) or 'none'}")
    status = 2 if not comparison.judged or (comparison.inconclusive and not comparison.failed) else 1 if comparison.failed else 0
    data = to_json(comparison, status)
    folder = Path(out) if out else new_run_folder(Path("results"), "compare")
    folder.mkdir(parents=True, exist_ok=True)
    import orjson

    from mcpbench.compare.chart import draw

    write_atomic(folder / COMPARE_JSON, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    draw(data, folder / COMPARE_PNG)
    junit, rows = suites(comparison)
    write_ci_outputs(junit, "mcpbench compare", junit_xml, None)
    write_ci_outputs(rows, "mcpbench compare", None, summary_md)
    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() if as_json else render(comparison))
    click.echo(f"mcpbench: wrote {folder / COMPARE_JSON} and {COMPARE_PNG}", err=as_json)
    if status == 2 and not comparison.judged:
        raise CompareError("too few samples to judge any step in common (see above): no verdict")
    if status == 2:
        raise CompareError(f"one run a side: a --fail-on rule broken by these two runs on {', '.join(comparison.inconclusive)} is "
                           f"inconclusive ({NO_BUILD_VERDICT}): no verdict; repeat the runs (--base A1 A2 A3 --new B1 B2 B3)")
    raise SystemExit(status)
