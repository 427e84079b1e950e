"""What a recorder runs beside itself, and the options that ask for it (layer 3).

`options.py`: `--otlp`, `--metrics`, `--service-name` (`TelemetryOptions`); `telemetry.py`: the
`Companion` that sends a recording's spans and metrics from a process of its own (`mcpbench
export --follow`), and a load run's samples once it is over; `live.py`: the live view of a
recording (`tee --live`, `record --live`: `mcpbench inspect --follow` on the recorder's terminal).
"""
