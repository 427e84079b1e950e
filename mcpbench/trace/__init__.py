"""Traces: the JSON Lines files every capture writes and every analysis reads."""

from mcpbench.trace.format import FORMAT_VERSION, Kind
from mcpbench.trace.reader import TraceReader, read_trace
from mcpbench.trace.redact import Redactor
from mcpbench.trace.writer import TraceWriter, default_trace_path

__all__ = ["FORMAT_VERSION", "Kind", "Redactor", "TraceReader", "TraceWriter", "default_trace_path", "read_trace"]
