"""What the benchmarks share: process statistics, the SSE load client, process control, reports."""
