"""Several routes in one stream (``/streams``), as pure functions over text and bytes.

- :mod:`.members`: the ``s`` parameters: each member's alias and path;
- :mod:`.ids`: the composite id, one part per member, that resumes them all;
- :mod:`.frames`: a member's frames relabelled (``event: <alias>``) with the composite id.

No Django here; ``streams.edge.streaming.mux_stream`` serves them.
"""
