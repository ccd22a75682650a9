"""REDIS_URL as channels-redis configuration: timeouts that outlast the blocking receive, TLS and Sentinel."""

from __future__ import annotations

import pytest
from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool
from django.core.exceptions import ImproperlyConfigured

from project.channel_layer import BLOCKING_RECEIVE_SECONDS, channel_layers, redis_host


def test_the_socket_timeout_outlasts_the_layers_blocking_receive() -> None:
    assert RedisChannelLayer.brpop_timeout == BLOCKING_RECEIVE_SECONDS
    host = redis_host("redis://127.0.0.1:6390/0")
    assert host["address"] == "redis://127.0.0.1:6390/0"
    assert host["socket_timeout"] > BLOCKING_RECEIVE_SECONDS
    pool = create_pool(host)
    assert pool.connection_kwargs["socket_timeout"] > BLOCKING_RECEIVE_SECONDS
    assert pool.connection_kwargs["db"] == 0


def test_without_a_url_the_in_memory_layer() -> None:
    assert channel_layers("")["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
    layers = channel_layers("redis://r:6379/1")
    assert layers["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert layers["default"]["CONFIG"]["hosts"][0]["address"] == "redis://r:6379/1"


def test_rediss_urls_make_tls_connections_with_their_options() -> None:
    pool = create_pool(redis_host("rediss://:secret@cache.example:6380/2?ssl_cert_reqs=none&socket_timeout=30"))
    assert pool.connection_class.__name__ == "SSLConnection"
    assert pool.connection_kwargs["host"] == "cache.example"
    assert pool.connection_kwargs["password"] == "secret"
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["socket_timeout"] == 30.0  # the URL's own option wins


def test_sentinel_urls_name_the_sentinels_the_service_and_the_db() -> None:
    host = redis_host("redis+sentinel://user:pa%40ss@s1:26379,s2,[::1]:26380/mymaster/3?sentinel_password=sp")
    assert host["master_name"] == "mymaster"
    assert host["sentinels"] == [("s1", 26379), ("s2", 26379), ("::1", 26380)]
    assert host["db"] == 3
    assert host["username"] == "user"
    assert host["password"] == "pa@ss"
    assert host["sentinel_kwargs"]["password"] == "sp"
    assert host["socket_timeout"] > BLOCKING_RECEIVE_SECONDS
    pool = create_pool(host)
    assert pool.service_name == "mymaster"
    assert pool.connection_class.__name__ == "SentinelManagedConnection"


def test_rediss_sentinel_urls_make_tls_connections_to_the_master() -> None:
    pool = create_pool(redis_host("rediss+sentinel://s1:26379/mymaster"))
    assert pool.connection_class.__name__ == "SentinelManagedSSLConnection"


@pytest.mark.parametrize("url", ["http://r:6379", "redis+sentinel://s1:26379", "redis+sentinel:///mymaster"])
def test_unusable_urls_are_refused(url: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        redis_host(url)


def test_unix_socket_urls() -> None:
    pool = create_pool(redis_host("unix:///run/redis.sock?db=1"))
    assert pool.connection_class.__name__ == "UnixDomainSocketConnection"
    assert pool.connection_kwargs["path"] == "/run/redis.sock"
    assert pool.connection_kwargs["socket_timeout"] > BLOCKING_RECEIVE_SECONDS
    pool.make_connection()
