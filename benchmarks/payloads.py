"""Realistic, deterministic payloads: the one source of data for every benchmark.

Why this module exists: payloads of repeated characters (``"x" * 470``) flatter
any store that compresses. Parquet's zstd, PostgreSQL's TOAST and snapshot
compression squeeze them to almost nothing, so bytes-per-event and
bytes-on-disk figures measured on them say nothing about real agents. Every
benchmark draws its data from here instead:

* **text** is words drawn uniformly at random from a fixed vocabulary of 2,048
  words (some carry a comma or a full stop), about 11 bits of entropy per
  word, which compresses about as well as English prose does;
* **opaque ids and blobs** (tool-call ids, completion ids, embeddings) are
  base64 of random bytes, which does not compress at all;
* **JSON** is shaped like what agents really store: chat messages, assistant
  messages with tool calls and their arguments, tool results such as search
  hits with titles, urls and snippets, full chat-completion objects.

Everything is deterministic: a generator is a :class:`random.Random` seeded
from :data:`SEED` and a label (:func:`rng`), so two runs of a benchmark store
byte-identical data. Sizes are given in bytes of compact JSON
(:func:`json_size`); the helpers fit their free-text field so that the whole
value comes out at that size, or at the smallest sensible shape when the
target is smaller than the fixed fields.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "PAYLOAD_BYTES",
    "SEED",
    "TOOL_NAMES",
    "VOCABULARY",
    "b64",
    "chat_completion",
    "conversation_message",
    "json_size",
    "message",
    "rng",
    "search_results",
    "text",
    "tool_result",
]

_T = TypeVar("_T")

#: The seed every generator derives from; change it and every payload changes.
SEED = 20_241_129

#: The size, in compact-JSON bytes, of every payload a benchmark stores: a
#: task's result, a step's message, a checkpoint's message. One constant, so
#: that a figure from one backend compares with a figure from another: the
#: Kafka, Redis, archive, runtime, event-log and PostgreSQL benchmarks once
#: stored 80 to 500 bytes each, and their rows could not be set side by side.
PAYLOAD_BYTES = 500

#: The tool names the benchmarks' tasks use; :func:`tool_result` shapes by name.
TOOL_NAMES = ("search", "fetch", "summarize", "llm_call", "embed")

# A fixed list of frequent English words, so that the text reads like text...
_COMMON_TEXT = (
    "the of and to a in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "so no will more other its can only into some could time these two may then do first "
    "any my now such like our over also new after most made did many before must through "
    "back years where much your way well down should because each just those people how "
    "too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might great old year "
    "off come since against go came right used take three agent model tool search result "
    "query answer request response token context memory plan step task retry error data"
)
_COMMON = _COMMON_TEXT.split()
_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w")
_ONSETS += ("br", "ch", "cl", "dr", "fr", "gr", "pl", "pr", "sh", "sk", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ie", "io", "ou")
_CODAS = ("", "", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng")


def _vocabulary(size: int) -> tuple[str, ...]:
    """The common words, then pseudo-words built from syllables, all distinct."""
    made = random.Random(f"{SEED}:vocabulary")
    words = dict.fromkeys(_COMMON)
    while len(words) < size:
        syllables = made.choice((1, 1, 2, 2, 2, 3))
        word = "".join(
            made.choice(_ONSETS) + made.choice(_VOWELS) + made.choice(_CODAS)
            for _ in range(syllables)
        )
        words.setdefault(word)
    return tuple(words)


_CLEAN = _vocabulary(2048)
#: The fixed vocabulary text is drawn from: one word in eight ends a clause.
VOCABULARY = tuple(
    word + ("," if i % 16 == 3 else "." if i % 16 == 11 else "") for i, word in enumerate(_CLEAN)
)
_TLDS = ("com", "org", "io", "dev", "net", "ai")
_MODELS = ("gpt-4o-2024-08-06", "claude-sonnet-4-20250514", "gemini-2.0-flash")


def rng(*label: object) -> random.Random:
    """A generator seeded from :data:`SEED` and ``label``: the same label, the same data.

    String seeds are hashed with SHA-512 by :class:`random.Random`, so the
    stream does not depend on ``PYTHONHASHSEED``.
    """
    return random.Random(":".join(map(str, (SEED, *label))))


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON: the size every helper here aims at."""
    return len(json.dumps(value, separators=(",", ":")))


def text(r: random.Random, nbytes: int) -> str:
    """``nbytes`` characters of random words, ending on a whole word or cut inside one."""
    if nbytes <= 0:
        return ""
    words = r.choices(VOCABULARY, k=nbytes // 5 + 2)  # the mean word is ~6.5 chars + space
    out = " ".join(words)
    while len(out) < nbytes:
        out += " " + " ".join(r.choices(VOCABULARY, k=nbytes // 5 + 2))
    return out[:nbytes].rstrip() or out[:nbytes]


def b64(r: random.Random, nbytes: int) -> str:
    """Base64 of ``nbytes`` random bytes: ids, signatures, embeddings (incompressible)."""
    return base64.b64encode(r.randbytes(nbytes)).decode("ascii")


def _words(r: random.Random, low: int, high: int) -> str:
    return " ".join(r.choices(_CLEAN, k=r.randint(low, high)))


def _url(r: random.Random) -> str:
    host, *path = r.choices(_CLEAN, k=4)
    return f"https://{host}.{r.choice(_TLDS)}/{path[0]}/{path[1]}-{path[2]}"


def _fit(build: Callable[[list[str]], _T], r: random.Random, nbytes: int, parts: int = 1) -> _T:
    """Fill a fixed shape with ``parts`` texts so that the whole comes to about ``nbytes``.

    ``build(texts)`` returns the value holding ``texts``; its size with empty
    texts is the overhead, and the rest of ``nbytes`` is shared among them.
    """
    free = max(0, nbytes - json_size(build([""] * parts)))
    share, extra = divmod(free, parts)
    return build([text(r, share + (i < extra)) for i in range(parts)])


def _call_id(r: random.Random) -> str:
    return "call_" + b64(r, 18)


def search_results(r: random.Random, nbytes: int, hits: int | None = None) -> list[dict[str, str]]:
    """A web-search tool's result: ``hits`` items (by default one per ~160 B, 1 to 5)."""
    hits = hits or max(1, min(5, nbytes // 160))
    heads = [(_words(r, 3, 8).title(), _url(r)) for _ in range(hits)]
    return _fit(
        lambda snippets: [
            {"title": title, "url": url, "snippet": snippet}
            for (title, url), snippet in zip(heads, snippets, strict=True)
        ],
        r,
        nbytes,
        hits,
    )


def chat_completion(r: random.Random, nbytes: int) -> dict[str, Any]:
    """An OpenAI-style chat completion object whose message content fills the size."""
    head = {"id": "chatcmpl-" + b64(r, 21), "object": "chat.completion"}
    created, model = 1_732_000_000 + r.randrange(10**7), r.choice(_MODELS)
    prompt, completion = r.randint(200, 8000), max(1, nbytes // 4)

    def build(texts: list[str]) -> dict[str, Any]:
        return {
            **head,
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": texts[0]},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    return _fit(build, r, nbytes)


def message(r: random.Random, nbytes: int, kind: str = "assistant") -> dict[str, Any]:
    """One chat message of about ``nbytes``.

    Args:
        r: The generator.
        nbytes: The target size in compact-JSON bytes.
        kind: ``"user"`` or ``"assistant"`` (text content), ``"tool_call"``
            (an assistant turn calling a search tool, with a little text and
            JSON arguments) or ``"tool"`` (the tool's answer: search results
            serialised as the message content, as chat APIs carry them).
    """
    if kind in ("user", "assistant"):
        return _fit(lambda texts: {"role": kind, "content": texts[0]}, r, nbytes)
    call_id = _call_id(r)
    if kind == "tool_call":
        arguments = json.dumps({"query": _words(r, 3, 9), "max_results": r.randint(3, 10)})
        return _fit(
            lambda texts: {
                "role": "assistant",
                "content": texts[0],
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "web_search", "arguments": arguments},
                    }
                ],
            },
            r,
            nbytes,
        )
    if kind == "tool":
        envelope = json_size({"role": "tool", "tool_call_id": call_id, "content": ""})
        results = search_results(r, max(0, nbytes - envelope))
        # the results travel as a JSON string, so each of their quotes costs one more byte:
        # take that cost out of the last snippet
        body = json.dumps(results, separators=(",", ":"))
        cut = json_size(body) - len(body) + len(body) - (nbytes - envelope)
        if cut > 0:
            last = results[-1]
            last["snippet"] = last["snippet"][: max(0, len(last["snippet"]) - cut)].rstrip()
            body = json.dumps(results, separators=(",", ":"))
        return {"role": "tool", "tool_call_id": call_id, "content": body}
    raise ValueError(f"unknown message kind {kind!r}: use user, assistant, tool_call or tool")


_CYCLE = ("user", "assistant", "tool_call", "tool", "assistant")


def conversation_message(r: random.Random, index: int, nbytes: int) -> dict[str, Any]:
    """The ``index``-th message of an agent's conversation, cycling through every kind."""
    return message(r, nbytes, _CYCLE[index % len(_CYCLE)])


def tool_result(r: random.Random, name: str, nbytes: int) -> Any:
    """What a task named ``name`` (one of :data:`TOOL_NAMES`) returns, about ``nbytes``.

    ``search`` gives search hits, ``fetch`` a fetched page, ``summarize`` a
    summary, ``llm_call`` a chat completion (a bare assistant message below
    300 bytes, where the completion's fixed fields would not fit) and
    ``embed`` a base64 float32 embedding.
    """
    if name == "search":
        return {"results": search_results(r, max(0, nbytes - 14))}
    if name == "fetch":
        url, status = _url(r), r.choice((200, 200, 200, 301, 404))
        return _fit(lambda texts: {"url": url, "status": status, "text": texts[0]}, r, nbytes)
    if name == "summarize":
        return _fit(lambda texts: {"summary": texts[0]}, r, nbytes)
    if name == "llm_call":
        return chat_completion(r, nbytes) if nbytes >= 300 else message(r, nbytes)
    if name == "embed":
        # base64 turns 3 bytes into 4; the model name and keys take ~50 bytes
        vector = b64(r, max(4, (nbytes - 50) * 3 // 4 // 4 * 4))
        return {"model": "text-embedding-3-small", "embedding": vector}
    raise ValueError(f"unknown tool {name!r}: use one of {', '.join(TOOL_NAMES)}")
