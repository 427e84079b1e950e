"""`--junit-xml FILE` and `--summary-md FILE`, shared by `replay`, `diff`, `inspect` and `load`."""

import os
from collections.abc import Sequence

import click

from mcpbench.ci.cases import Suite
from mcpbench.cliutil import check_output


def ci_options(func):
    """The two options; the command gets `junit_xml` and `summary_md`."""
    func = click.option("--summary-md", "summary_md", type=click.Path(dir_okay=False), metavar="FILE",
                        help="Also write a Markdown summary (for $GITHUB_STEP_SUMMARY or a pull-request comment).")(func)
    return click.option("--junit-xml", "junit_xml", type=click.Path(dir_okay=False), metavar="FILE",
                        help="Also write the result as JUnit XML, for CI test reporters.")(func)


def check_ci_outputs(junit_xml: str | None, summary_md: str | None) -> None:
    """Fail before any work when an output cannot be written (exit 2, naming it)."""
    check_output(junit_xml, "--junit-xml")
    check_output(summary_md, "--summary-md")


def write_ci_outputs(suites: Sequence[Suite], title: str, junit_xml: str | os.PathLike | None,
                     summary_md: str | os.PathLike | None) -> None:
    """Write whichever of the two files was asked for (each written beside and renamed into place)."""
    from mcpbench.files.outputs import write_atomic

    if junit_xml:
        from mcpbench.ci.junit import to_xml

        write_atomic(junit_xml, to_xml(suites, title))
    if summary_md:
        from mcpbench.ci.markdown import to_markdown

        write_atomic(summary_md, to_markdown(suites, title).encode())
