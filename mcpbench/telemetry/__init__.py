"""What a trace shows, sent to the user's observability stack: OpenTelemetry spans and metrics over
OTLP/HTTP, and Prometheus metrics (`mcpbench export --otlp`, `tee`/`record --otlp`/`--metrics`)."""
