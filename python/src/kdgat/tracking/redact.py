"""Credentials out of tracking URIs before they are logged or kept in a file.

An MLflow URI may carry a password (``https://user:secret@host/``) or a token in its query string
(``?token=…``). What the stage logs, what it keeps in ``checkpoints/tracking.json`` and in a
sweep's ``tracking-parent.json`` (files in a run dir that the project group may read, and that
``runner`` copies back to the laptop) gets :func:`redact_uri`'s form; the real URI is only ever
read from the config or ``$MLFLOW_TRACKING_URI`` (:mod:`kdgat.tracking.settings`), so a requeued
life that continues its runs gets the credentials again from where the first life got them and
compares the kept copy with the redacted form of its own.

The user name is kept and the password replaced by ``***`` (not the whole userinfo dropped): the
user is not a secret and says which account the runs were logged as, so a change of account is
still seen as a change of URI. A userinfo without a password is masked whole: there it is often a
token on its own (``https://<token>@host``).
"""

from __future__ import annotations

import re

MASK = "***"
#: A query parameter whose value is a credential (``token``, ``access_token``, ``api_key``,
#: ``password``, ``X-Amz-Signature``, ``sig``, ``secret``, ``auth``, ``credential``, ``session``).
SECRET_PARAM = re.compile(r"token|key|secret|pass(word|wd)?|pwd|auth|sig(nature)?|credential|session", re.I)
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@]*)@")
#: A URI inside free text (a log line, an exception's message).
_URI_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def _query(query: str) -> str:
    pairs = []
    for pair in query.split("&"):
        name, eq, _ = pair.partition("=")
        pairs.append(f"{name}={MASK}" if eq and SECRET_PARAM.search(name) else pair)
    return "&".join(pairs)


def redact_uri(uri: str) -> str:
    """``uri`` with the password of its userinfo (or a userinfo without one, whole) and the values
    of credential-like query parameters replaced by ``***``; otherwise unchanged, character for
    character (``sqlite:////abs/m.db`` stays as it is)."""
    out = uri
    m = _USERINFO.match(out)
    if m:
        user, colon, _ = m["userinfo"].partition(":")
        masked = f"{user}:{MASK}" if colon else MASK
        out = f"{m['scheme']}{masked}@{out[m.end() :]}"
    head, q, rest = out.partition("?")
    if q:
        query, hash_, fragment = rest.partition("#")
        out = f"{head}?{_query(query)}{hash_}{fragment}"
    return out


def redact_text(text: str) -> str:
    """Every URI in ``text`` redacted by :func:`redact_uri` (for messages that may quote one)."""
    return _URI_IN_TEXT.sub(lambda m: redact_uri(m.group(0)), text)
