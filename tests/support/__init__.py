"""Helpers the tests share: SSE client, polling, loopback servers, tokens, fixtures."""
