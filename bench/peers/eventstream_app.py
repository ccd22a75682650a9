"""django-eventstream on Django + Channels + daphne, no storage: a live broadcast per channel.

    daphne -b 127.0.0.1 -p P eventstream_app:application   (with bench/peers on sys.path)

``send_event`` is called in process by the publisher, in daphne's event loop.
"""

from __future__ import annotations

import json

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django_eventstream"],
    DATABASES={},
    MIDDLEWARE=[],
    LOGGING_CONFIG=None,
)
django.setup()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import include, path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402
from django_eventstream import send_event  # noqa: E402
from publisher import Publisher  # noqa: E402

publisher = Publisher(lambda channel, text: send_event(channel, "message", text, json_encode=False))


@csrf_exempt
async def start(request: HttpRequest) -> HttpResponse:
    q = request.GET
    publisher.start(float(q["rate"]), int(q["count"]), int(q["size"]), int(q.get("keys", "0")))
    return HttpResponse(json.dumps({"started": True}), content_type="application/json")


async def status(request: HttpRequest) -> HttpResponse:
    return HttpResponse(json.dumps(publisher.status()), content_type="application/json")


urlpatterns = [
    path("events/<channel>", include("django_eventstream.urls"), {"format-channels": ["{channel}"]}),
    path("start", start),
    path("status", status),
]

application = ProtocolTypeRouter({"http": get_asgi_application()})
