"""HTTP at the edge: the parsed request, answers, CORS, the access log, per-address limits, counters."""
