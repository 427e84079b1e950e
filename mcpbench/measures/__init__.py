"""Measures as people write and read them: durations (`durations.py`), percentiles and small statistics (`stats.py`)."""
