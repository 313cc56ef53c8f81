"""τ²-bench banking_knowledge: the tasks our tools cover, on tools of our own.

The data (``db.json``, ``tasks.json``) is read at run time from a tau2-bench checkout or
git directory (`data.repo_file`); it is not in the PyPI wheel. τ² reaches most of its
banking tools through ``unlock_discoverable_agent_tool`` / ``call_discoverable_*_tool``;
here a call of a discoverable tool is that tool's own call (the unlock and give steps,
which only make a tool callable, are dropped), and user tools are called by the same
agent, as in τ²'s solo mode.

Kept: the tasks scored on the database (``reward_basis`` has ``DB``) whose actions are all
among the tools below. Every other task is left out, counted by reason in
`Domain.left_out`.

Our tools follow τ²'s records (ids derived from the arguments by a SHA-256 digest, so that
a later action can name an account an earlier one opened) with one deliberate change: τ²
refuses a record whose id already exists, which makes a repeated ``apply_for_credit_card``
a silent no-op; ours files the repeat as a second record (``<id>~2``), as a service without
idempotency keys does, so a write that ran twice shows in the database. Reads added for
checking a write, which τ² lacks: ``get_verification_history``,
``get_credit_card_applications``, ``get_cash_back_disputes``, ``get_bank_account_details``.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .core import Action, Domain, DomainError, Env, Task, ToolSpec
from .data import repo_json

NAME = "banking_knowledge"
TODAY = "11/14/2025"
ACCOUNT_TYPES = ("checking", "savings", "business_checking", "business_savings")


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).digest()[:8].hex()


def _table(env: Env, name: str) -> dict[str, Any]:
    return env.db.setdefault(name, {})


def _add(env: Env, table: str, record_id: str, record: dict[str, Any]) -> str:
    """File `record` under `record_id`, or ``<record_id>~k`` when that is taken."""
    data = _table(env, table)
    key, k = record_id, 1
    while key in data:
        k += 1
        key = f"{record_id}~{k}"
    data[key] = record
    return key


def _where(env: Env, table: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in _table(env, table).values() if all(r.get(k) == v for k, v in match.items())]


def _money(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).replace("$", "").replace(",", "") or 0)
    except ValueError:
        return 0.0


def _account(env: Env, account_id: str) -> dict[str, Any]:
    acc = _table(env, "accounts").get(account_id)
    if acc is None:
        raise DomainError(f"account {account_id} not found")
    return acc


# -- reads --------------------------------------------------------------------------------


def get_user_information_by_id(env: Env, user_id: str) -> dict[str, Any]:
    """A user's profile."""
    user = _table(env, "users").get(user_id)
    if user is None:
        raise DomainError(f"user {user_id} not found")
    return user


def get_referrals_by_user(env: Env, user_id: str) -> list[dict[str, Any]]:
    """The referrals a user made."""
    return _where(env, "referrals", referrer_id=user_id)


def get_credit_card_accounts_by_user(env: Env, user_id: str) -> list[dict[str, Any]]:
    """A user's credit card accounts."""
    return _where(env, "credit_card_accounts", user_id=user_id)


def get_credit_card_transactions_by_user(env: Env, user_id: str) -> list[dict[str, Any]]:
    """A user's credit card transactions."""
    return _where(env, "credit_card_transaction_history", user_id=user_id)


def get_all_user_accounts_by_user_id_3847(env: Env, user_id: str) -> list[dict[str, Any]]:
    """A user's bank accounts (checking and savings)."""
    return _where(env, "accounts", user_id=user_id)


def get_bank_account_details(env: Env, account_id: str) -> dict[str, Any]:
    """One bank account: status and holdings."""
    return _account(env, account_id)


def get_verification_history(env: Env, user_id: str) -> list[dict[str, Any]]:
    """The identity verifications logged for a user."""
    return _where(env, "verification_history", user_id=user_id)


def get_credit_card_applications(env: Env, customer_name: str) -> list[dict[str, Any]]:
    """The credit card applications filed under a name."""
    return _where(env, "credit_card_applications", customer_name=customer_name)


def get_cash_back_disputes(env: Env, user_id: str) -> list[dict[str, Any]]:
    """The cash back disputes a user submitted."""
    return _where(env, "cash_back_disputes", user_id=user_id)


# -- writes -------------------------------------------------------------------------------


def log_verification(
    env: Env,
    name: str,
    user_id: str,
    address: str,
    email: str,
    phone_number: str,
    date_of_birth: str,
    time_verified: str,
) -> str:
    """Record that a user's identity was verified."""
    record = {
        "name": name,
        "user_id": user_id,
        "address": address,
        "email": email,
        "phone_number": phone_number,
        "date_of_birth": date_of_birth,
        "time_verified": time_verified,
    }
    day = "".join(ch for ch in time_verified.split(" ")[0] if ch.isdigit())
    key = _add(env, "verification_history", f"{user_id}_{day}", record)
    return f"Verification {key} logged."


def apply_for_credit_card(
    env: Env,
    card_type: str,
    customer_name: str,
    annual_income: float,
    rho_bank_subscription: bool = False,
) -> str:
    """File a credit card application."""
    income = float(annual_income)
    record = {
        "card_type": card_type,
        "customer_name": customer_name,
        "annual_income": income,
        "rho_bank_subscription": rho_bank_subscription,
        "status": "PENDING",
        "date": TODAY,
    }
    seed = f"application:{card_type}:{customer_name}:{income}:{rho_bank_subscription}"
    key = _add(env, "credit_card_applications", _digest(seed), record)
    record["application_id"] = key
    return f"Application {key} submitted."


def submit_referral(env: Env, user_id: str, account_type: str) -> str:
    """Refer someone to open an account or card."""
    record = {
        "referrer_id": user_id,
        "referred_account_type": account_type,
        "referral_status": "NO_PROGRESS",
        "date": TODAY,
    }
    key = _add(env, "referrals", _digest(f"referral:{user_id}:{account_type}"), record)
    record["referral_id"] = key
    return f"Referral {key} submitted."


def submit_cash_back_dispute_0589(env: Env, user_id: str, transaction_id: str) -> str:
    """Dispute the cash back of a credit card transaction."""
    record = {
        "user_id": user_id,
        "transaction_id": transaction_id,
        "submitted_at": TODAY,
        "status": "SUBMITTED",
    }
    key = _add(
        env,
        "cash_back_disputes",
        "dsp_" + _digest(f"dispute:{user_id}:{transaction_id}")[:12],
        record,
    )
    record["dispute_id"] = key
    return f"Dispute {key} submitted."


def open_bank_account_4821(env: Env, user_id: str, account_type: str, account_class: str) -> str:
    """Open a bank account (checking, savings, business_checking, business_savings)."""
    if account_type not in ACCOUNT_TYPES:
        raise DomainError(f"account_type must be one of {', '.join(ACCOUNT_TYPES)}")
    record = {
        "user_id": user_id,
        "account_type": account_type,
        "account_class": account_class,
        "current_holdings": "0.00",
        "status": "OPEN",
        "date_opened": TODAY,
    }
    key = _add(
        env, "accounts", _digest(f"account:{user_id}:{account_type}:{account_class}"), record
    )
    record["account_id"] = key
    return f"Account {key} opened."


def close_bank_account_7392(
    env: Env,
    account_id: str,
    reason: str = "Customer requested closure",
    waive_early_closure_fee: bool = False,
) -> str:
    """Close a bank account."""
    acc = _account(env, account_id)
    if acc.get("status") == "CLOSED":
        raise DomainError(f"account {account_id} is already closed")
    acc.update(status="CLOSED", date_closed=TODAY, closure_reason=reason, early_closure_fee_waived=waive_early_closure_fee)  # fmt: skip
    return f"Account {account_id} closed."


def change_user_email(env: Env, user_id: str, new_email: str) -> str:
    """Change a user's email address."""
    user = get_user_information_by_id(env, user_id)
    user["email"] = new_email
    return f"Email of {user_id} changed."


def deposit_check_3847(env: Env, account_id: str, check_amount: float) -> str:
    """Deposit a check into a bank account."""
    acc = _account(env, account_id)
    if float(check_amount) <= 0:
        raise DomainError("check_amount must be positive")
    if acc.get("status") not in ("OPEN", "ACTIVE"):
        raise DomainError(f"account {account_id} is not open")
    acc["current_holdings"] = f"${_money(acc.get('current_holdings')) + float(check_amount):.2f}"
    return f"Deposited {float(check_amount):.2f} into {account_id}."


def transfer_funds_between_bank_accounts_7291(
    env: Env, source_account_id: str, destination_account_id: str, amount: float
) -> str:
    """Move money from one bank account to another."""
    src, dst = _account(env, source_account_id), _account(env, destination_account_id)
    amount = float(amount)
    if amount <= 0 or source_account_id == destination_account_id:
        raise DomainError("a transfer needs a positive amount between two accounts")
    if src.get("status") not in ("OPEN", "ACTIVE") or dst.get("status") not in ("OPEN", "ACTIVE"):
        raise DomainError("both accounts must be open")
    if _money(src.get("current_holdings")) < amount:
        raise DomainError("insufficient funds")
    src["current_holdings"] = f"${_money(src.get('current_holdings')) - amount:.2f}"
    dst["current_holdings"] = f"${_money(dst.get('current_holdings')) + amount:.2f}"
    return f"Transferred {amount:.2f} from {source_account_id} to {destination_account_id}."


def transfer_to_human_agents(env: Env, summary: str, reason: str = "other") -> str:
    """Hand the user over to a human agent."""
    env.db.setdefault("transfers", []).append({"summary": summary, "reason": reason})
    return "Transfer successful."


SPECS = [
    ToolSpec("get_user_information_by_id", get_user_information_by_id, "A user's profile.", False),
    ToolSpec("get_referrals_by_user", get_referrals_by_user, "The referrals a user made.", False),
    ToolSpec("get_credit_card_accounts_by_user", get_credit_card_accounts_by_user, "A user's credit card accounts.", False),
    ToolSpec("get_credit_card_transactions_by_user", get_credit_card_transactions_by_user, "A user's card transactions.", False),
    ToolSpec("get_all_user_accounts_by_user_id_3847", get_all_user_accounts_by_user_id_3847, "A user's bank accounts.", False),
    ToolSpec("get_bank_account_details", get_bank_account_details, "One bank account.", False),
    ToolSpec("get_verification_history", get_verification_history, "Verifications logged for a user.", False),
    ToolSpec("get_credit_card_applications", get_credit_card_applications, "Applications under a name.", False),
    ToolSpec("get_cash_back_disputes", get_cash_back_disputes, "A user's cash back disputes.", False),
    ToolSpec("log_verification", log_verification, "Record a verified identity.", True),
    ToolSpec("apply_for_credit_card", apply_for_credit_card, "File a credit card application.", True),
    ToolSpec("submit_referral", submit_referral, "Refer someone.", True),
    ToolSpec("submit_cash_back_dispute_0589", submit_cash_back_dispute_0589, "Dispute a transaction's cash back.", True),
    ToolSpec("open_bank_account_4821", open_bank_account_4821, "Open a bank account.", True),
    ToolSpec("close_bank_account_7392", close_bank_account_7392, "Close a bank account.", True),
    ToolSpec("change_user_email", change_user_email, "Change a user's email.", True),
    ToolSpec("deposit_check_3847", deposit_check_3847, "Deposit a check.", True),
    ToolSpec("transfer_funds_between_bank_accounts_7291", transfer_funds_between_bank_accounts_7291, "Move money between accounts.", True),
    ToolSpec("transfer_to_human_agents", transfer_to_human_agents, "Hand the user to a human agent.", True),
]  # fmt: skip

CHECKS: dict[str, Callable[[Mapping[str, Any]], Action | None]] = {
    "log_verification": lambda a: Action("get_verification_history", {"user_id": a["user_id"]}),
    "apply_for_credit_card": lambda a: Action("get_credit_card_applications", {"customer_name": a["customer_name"]}),
    "submit_referral": lambda a: Action("get_referrals_by_user", {"user_id": a["user_id"]}),
    "submit_cash_back_dispute_0589": lambda a: Action("get_cash_back_disputes", {"user_id": a["user_id"]}),
    "open_bank_account_4821": lambda a: Action("get_all_user_accounts_by_user_id_3847", {"user_id": a["user_id"]}),
    "close_bank_account_7392": lambda a: Action("get_bank_account_details", {"account_id": a["account_id"]}),
    "change_user_email": lambda a: Action("get_user_information_by_id", {"user_id": a["user_id"]}),
    "deposit_check_3847": lambda a: Action("get_bank_account_details", {"account_id": a["account_id"]}),
    "transfer_funds_between_bank_accounts_7291": lambda a: Action(
        "get_bank_account_details", {"account_id": a["source_account_id"]}
    ),
}  # fmt: skip

_META = {"unlock_discoverable_agent_tool", "give_discoverable_user_tool"}


def _flatten(raw: list[dict[str, Any]]) -> list[Action]:
    import json

    out = []
    for a in raw:
        name, args = a["name"], a.get("arguments") or {}
        if name in _META:
            continue
        if name.startswith("call_discoverable_"):
            name = (
                args.get("agent_tool_name")
                or args.get("discoverable_tool_name")
                or args.get("tool_name")
            )
            inner = args.get("arguments") or {}
            args = json.loads(inner) if isinstance(inner, str) else inner
        out.append(Action(str(name), args))
    return out


def _start(base: dict[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    db = copy.deepcopy(base)
    agent_data = ((task.get("initial_state") or {}).get("initialization_data") or {}).get(
        "agent_data"
    ) or {}
    for table, value in agent_data.items():
        if table == "task_config":
            continue
        rows = value.get("data", value) if isinstance(value, dict) else {}
        db.setdefault(table, {}).update(copy.deepcopy(rows))
    return db


def domain(repo: Path) -> Domain:
    """The banking_knowledge tasks our tools cover, read from the tau2-bench at `repo`."""
    raw_db = repo_json(repo, NAME, "db.json")
    base = {table: dict(v.get("data", {})) for table, v in raw_db.items() if isinstance(v, dict)}
    names = {s.name for s in SPECS}
    tasks, left_out = [], Counter()
    for t in repo_json(repo, NAME, "tasks.json"):
        criteria = t.get("evaluation_criteria") or {}
        if "DB" not in (criteria.get("reward_basis") or []):
            left_out["scored on actions or text, not the database"] += 1
            continue
        actions = _flatten(criteria.get("actions") or [])
        missing = sorted({a.name for a in actions} - names)
        if missing:
            left_out["uses a tool we do not implement"] += 1
            continue
        if not any(a.name in {s.name for s in SPECS if s.write} for a in actions):
            left_out["no write"] += 1
            continue
        tasks.append(Task(t["id"], _start(base, t), tuple(actions)))
    return Domain(
        NAME,
        SPECS,
        tasks,
        CHECKS,
        source=f"tau2-bench ({repo}): data/tau2/domains/{NAME}/tasks.json, db.json",
        left_out=dict(left_out),
    )
