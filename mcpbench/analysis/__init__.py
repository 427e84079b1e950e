"""Analysis: from traces and load results to summaries, DataFrames and charts."""
