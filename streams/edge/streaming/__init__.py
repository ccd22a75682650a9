"""A stream request's stream: its routes, their opening, the open response, its sources and its end."""
