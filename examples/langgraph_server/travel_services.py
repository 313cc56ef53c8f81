"""The example's misbehaving services, as LangChain tools (offline, no API key).

Every tool call that reaches a service appends one line, ``<thread id>\\t<tool>``, to the
file named by the environment variable ``SERVICE_CALL_LOG`` (when it is set), so that
you (and the tests) can see what the services really received, from another process.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from typing import Annotated

from langchain_core.tools import InjectedToolArg, tool
from langgraph.config import get_config, get_stream_writer

SECRET = "hunter2"
_hang = threading.Event()
"""Never set: the hung services wait on it until their own limit."""
_flaky: dict[str, itertools.count[int]] = {}
_orders: dict[str, str] = {}
_log_lock = threading.Lock()


def record(tool_name: str) -> None:
    """Note one call that reached a service (see the module docstring)."""
    path = os.environ.get("SERVICE_CALL_LOG")
    if not path:
        return
    thread_id = get_config().get("configurable", {}).get("thread_id", "-")
    with _log_lock, open(path, "a", encoding="utf-8") as log:
        log.write(f"{thread_id}\t{tool_name}\n")


@tool
def search_flights(destination: str) -> str:
    """Search flights to a destination (its service drops every other request for each)."""
    record("search_flights")
    get_stream_writer()({"tool": "search_flights", "progress": f"searching {destination}"})
    if next(_flaky.setdefault(destination, itertools.count())) % 2 == 0:
        raise ConnectionError("upstream reset by peer")
    return json.dumps({"flights": [{"to": destination, "price": 129}]})


@tool
def get_report(topic: str) -> str:
    """Fetch an analyst report (its service hangs)."""
    record("get_report")
    _hang.wait(5)
    return "late report"


@tool
def get_customer(customer_id: str) -> str:
    """Look up a customer (its database errors leak a password)."""
    record("get_customer")
    raise ValueError(f"connect failed: postgresql://app:{SECRET}@db:5432/crm password={SECRET}")


@tool
def create_order(item: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
    """Order an item (the first reply for each order is lost after the order landed)."""
    record("create_order")
    first = idempotency_key not in _orders
    _orders[idempotency_key] = f"order {idempotency_key[:8]} for {item}"
    if first:
        raise ConnectionError("connection reset by peer")
    return _orders[idempotency_key]


@tool
def book_hotel(hotel: str) -> str:
    """Book a hotel room (its service answers at once)."""
    record("book_hotel")
    return f"booked a room at {hotel}"


@tool
def get_exchange_rate(currency: str) -> str:
    """The exchange rate of a currency to the euro (its service is down)."""
    record("get_exchange_rate")
    raise ConnectionError("rates service unreachable")


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    record("get_weather")
    return f"sunny in {city}"
