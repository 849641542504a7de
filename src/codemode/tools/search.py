"""Lexical ranking for discovery: BM25 over names, descriptions and parameter names.

``LexicalIndex`` knows nothing about tools: it ranks ``(key, text)`` documents and is meant
to be shared (skills use the same ranker). ``ToolIndex`` is the tool layer: it builds each
tool's text (the name weighted up, split on snake/camel/kebab case) and renders results at
the three detail levels.

Scoring uses ``bm25s`` (numpy only, imported on first build). Tokens are lower-cased,
split on case and punctuation, and lightly stemmed (``files`` -> ``file``, ``staging`` ->
``stag`` like ``stage``) on both sides. A word in mixed case is also kept whole
("GitHub" -> ``git``, ``hub``, ``github``): product names are written so in prose and in
lower case in server and tool names; a query uses the whole word when the index knows it,
so one name counts once.

People ask for tools in other words than the tools' authors used ("remove" for
``delete_*``, "folder" for "directory"), so a tool's document also carries the synonyms of
the words of its name, from :data:`~codemode.tools.vocabulary.SYNONYMS` (general software
vocabulary, not tuned to any query set). The query is expanded the same way, at a lower
weight (:data:`RELATED_WEIGHT`), so a synonym also reaches the words of descriptions while
the user's own words still count most; before that, :func:`~codemode.tools.vocabulary.canonical`
adds the plain verb of a phrasal one ("turn off" -> "disable") and the kind of a value the
query names (a file name -> "file").

Authors close compounds that users write open ("worklog" for "log work", "filesystem",
"textbox"), so a tool's document also carries the two parts of each of its words that
joins two words of the catalog's own vocabulary (:func:`compound_parts`).

A tool's name says what it does in two or three words (verb and object), and its
description may be long: siblings of one server (``create_property``, ``list_properties``)
share the object words, and a long description that mentions "list" once scores as well as
the name that says it. So a tool also earns a share of the best score by how much of its
name the query covers (:data:`NAME_COVER_WEIGHT`). The discovery benchmark
(``codemode bench discovery``) measures the effect on held-out queries.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from codemode.tools.vocabulary import SYNONYMS, canonical

K = TypeVar("K", bound=Hashable)
Detail = Literal["name", "description", "full"]
DETAILS: tuple[Detail, ...] = ("name", "description", "full")

_PART = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    "a an and are as at be by for from in into is it of on or that the this to with".split()  # noqa: SIM905
)


RELATED_WEIGHT = 0.25
"""Weight of a query word's synonyms against the word itself (chosen on the benchmark's
``dev`` queries: 0.2 to 0.35 all help; a synonym is weaker evidence than the word)."""
NAME_COVER_WEIGHT = 0.1
"""Share of the query's best BM25 score a tool earns when the query covers every word of
its name; a name word met through a synonym counts half (:data:`NAME_COVER_RELATED`).
Chosen on ``dev``: 0.05 to 0.2 all raise recall@1; above 0.15, recall@5 drops."""
NAME_COVER_RELATED = 0.5
CHOICES_MOST = 3
"""A parameter's ``enum`` joins the document when it has at most this many values: a short
one names the tool's modes in users' words ("portrait"/"landscape", "asc"/"desc"); a long
one is a catalogue of identifiers (regions, languages). Chosen on ``dev``: 3 beat 5-20."""


COMPOUND_PART = 3
"""Shortest part a compound word is split into ("worklog" -> work, log)."""
COMPOUND_SEEN = 2
"""A part must be a word of at least this many tools' documents: a word the catalog uses
on its own, not a fragment."""
_PREFIXES = frozenset(
    "anti auto co com con de dis ex im in inter intra multi non out over per pre pro re "  # noqa: SIM905
    "semi sub super trans un under".split()
)
"""English prefixes: "preview", "subscript", "permission" and "output" are not compounds of
the words "pre", "sub", "per" and "out" and whatever follows."""


def _stem(token: str) -> str:
    """Strip at most one suffix (plural, -ing, -ed, -ion, a final -e), so that "stage" and
    "staging", "associate" and "association" meet; short words are kept whole."""
    if len(token) <= 3:
        return token
    if token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith(("sses", "xes", "ches", "shes")):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    elif token.endswith("ing") and len(token) > 5:
        token = token[:-3]
    elif token.endswith("ed") and len(token) > 4:
        token = token[:-2]
    elif token.endswith("ion") and len(token) > 6:
        token = token[:-3]
    elif token.endswith("e") and len(token) > 4:
        token = token[:-1]
    return token


@functools.lru_cache(maxsize=1 << 16)
def _words(part: str) -> tuple[tuple[str, ...], str]:
    """Normalized tokens of one alphanumeric run, and the whole run as one token when it
    is a word in mixed case ("GitHub", "appTable"), else "" (memoized: vocabularies are
    small)."""
    out = []
    pieces = _CAMEL.findall(part) if part.isascii() else [part]
    for word in pieces:
        low = word.lower()
        if low not in _STOP:
            out.append(_stem(low))
    whole = _stem(part.lower()) if len(pieces) > 1 and part.isalpha() else ""
    return tuple(out), whole


def tokenize(text: str) -> list[str]:
    """Words of ``text``, lower-cased and stemmed; compound identifiers are split, and a
    word in mixed case is also kept whole ("GitHub" -> git, hub, github)."""
    out: list[str] = []
    for part in _PART.findall(text):
        words, whole = _words(part)
        out.extend(words)
        if whole:
            out.append(whole)
    return out


def query_words(text: str, known: Container[str]) -> list[str]:
    """Words of a query: like :func:`tokenize`, but a word in mixed case counts once, whole
    when ``known`` holds it ("GitHub" -> github), else as its parts."""
    out: list[str] = []
    for part in _PART.findall(text):
        words, whole = _words(part)
        if whole and whole in known:
            out.append(whole)
        else:
            out.extend(words)
    return out


def compound_parts(corpus: Sequence[list[str]]) -> dict[str, tuple[str, str]]:
    """Words of ``corpus`` (token lists) written as one that join two of its own words
    ("worklog", "filesystem", "textbox"), each -> its two parts.

    Authors write compounds closed ("worklog") where users write them open ("log work"),
    or the reverse; the parts are the corpus's own words (each in at least
    :data:`COMPOUND_SEEN` documents, at least :data:`COMPOUND_PART` characters long, the
    first not an English prefix), so no dictionary is needed and the split is the catalog's
    own vocabulary. The first split from the left wins."""
    seen: dict[str, int] = {}
    for tokens in corpus:
        for t in set(tokens):
            seen[t] = seen.get(t, 0) + 1
    known = {t for t, n in seen.items() if n >= COMPOUND_SEEN}
    out: dict[str, tuple[str, str]] = {}
    for word in seen:
        if len(word) < 2 * COMPOUND_PART or not word.isalpha():
            continue
        for i in range(COMPOUND_PART, len(word) - COMPOUND_PART + 1):
            head, tail = word[:i], word[i:]
            if head in known and tail in known and head not in _PREFIXES:
                out[word] = (head, tail)
                break
    return out


class LexicalIndex(Generic[K]):
    """BM25 over ``(key, text)`` documents; ``search`` returns ``(key, score)`` best first."""

    def __init__(
        self,
        docs: Sequence[tuple[K, str]],
        *,
        tokens: Sequence[list[str]] | None = None,
        related: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``tokens`` (one list per doc) replaces tokenizing the texts, for weighted fields;
        ``related`` maps a query token to tokens that also count, at :data:`RELATED_WEIGHT`."""
        self.keys: list[K] = [k for k, _ in docs]
        self._related: Mapping[str, Sequence[str]] = related or {}
        corpus = list(tokens) if tokens is not None else [tokenize(text) for _, text in docs]
        self._retriever: Any = None
        self._vocab: dict[str, int] = {}
        if any(corpus):
            import bm25s  # numpy-only, ~90 ms to import: kept off import paths

            # bm25s sets its own logger to DEBUG on import; keep its progress chatter quiet.
            logging.getLogger("bm25s").setLevel(logging.WARNING)
            retriever = bm25s.BM25()
            retriever.index(corpus, show_progress=False)
            self._retriever = retriever
            self._vocab = retriever.vocab_dict

    def __len__(self) -> int:
        return len(self.keys)

    def search(self, query: str, limit: int = 10, *, weak: str = "") -> list[tuple[K, float]]:
        """``weak`` words count at :data:`RELATED_WEIGHT`, like the synonyms of ``query``'s."""
        if limit <= 0:
            return []
        scores = self.scores(self.words(query), weak=weak)
        return [] if scores is None else self.top(scores, limit)

    def words(self, query: str) -> list[str]:
        """The query's tokens as this index matches them (:func:`query_words`)."""
        return query_words(query, self._vocab)

    def scores(self, words: Sequence[str], *, weak: str = "") -> Any:
        """Every document's score for the query ``words`` (a numpy array in key order), or
        None when neither they, their synonyms nor ``weak`` are in any document."""
        if self._retriever is None:
            return None
        ids = self._ids(words)
        related = [r for w in words for r in self._related.get(w, ()) if r not in words]
        extra = self._ids([*related, *(w for w in tokenize(weak) if w not in words)])
        if not ids and not extra:
            return None
        import numpy as np

        if ids:
            scores = self._retriever.get_scores_from_ids(ids)
        else:
            scores = np.zeros(len(self.keys), dtype=np.float32)
        if extra:
            scores = scores + RELATED_WEIGHT * self._retriever.get_scores_from_ids(extra)
        return scores

    def top(self, scores: Any, limit: int) -> list[tuple[K, float]]:
        """The ``limit`` best documents with a positive score, best first."""
        import numpy as np

        n = len(scores)
        k = min(limit, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        # Ties keep insertion order: a stable, predictable ranking.
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.keys[i], float(scores[i])) for i in order if scores[i] > 0]

    def _ids(self, words: Iterable[str]) -> list[int]:
        return list(dict.fromkeys(self._vocab[t] for t in words if t in self._vocab))


# -- the tool layer ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """What discovery knows about one tool (built by the registry).

    ``signature`` may be a callable: rendering signatures of 10,000 tools up front costs
    ~0.3 s, and only the few shown at ``description`` level or above need one.
    """

    name: str  # server.tool in Python identifiers
    original: str  # server.tool as the source names it
    description: str
    signature_text: str | Callable[[], str]
    parameters: tuple[str, ...] = ()
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    title: str | None = None

    @property
    def signature(self) -> str:
        sig = self.signature_text
        return sig if isinstance(sig, str) else sig()

    def name_words(self) -> list[str]:
        """The words of the tool's own name (Python and original), without its server's."""
        tool = self.name.partition(".")[2]
        original = self.original.partition(".")[2]
        return tokenize(tool if original == tool else f"{tool} {original}")

    def choices(self) -> list[str]:
        """The values of the short ``enum`` lists of the tool's parameters
        (:data:`CHOICES_MOST`)."""
        props = (self.input_schema or {}).get("properties")
        out: list[str] = []
        for prop in props.values() if isinstance(props, dict) else ():
            if not isinstance(prop, dict):
                continue
            items = prop.get("items")
            values = prop.get("enum") or (items.get("enum") if isinstance(items, dict) else None)
            if isinstance(values, list) and len(values) <= CHOICES_MOST:
                out += [v for v in values if isinstance(v, str)]
        return out

    def tokens(self) -> list[str]:
        """The document BM25 sees: the names (tool, title, server) count twice; the
        description, the parameter names, their short lists of choices and the synonyms of
        the names' words once."""
        server = self.name.partition(".")[0]
        names = self.name_words()
        if self.title:
            names += tokenize(self.title)
        names += tokenize(server)
        rest = tokenize(" ".join([server, self.description, *self.parameters, *self.choices()]))
        synonyms = _synonyms()
        related = [s for t in dict.fromkeys(names) for s in synonyms.get(t, ())]
        return names * 2 + rest + related


@functools.cache
def _synonyms() -> dict[str, tuple[str, ...]]:
    """Stemmed word -> the other stemmed words of its :data:`SYNONYMS` group."""
    out: dict[str, tuple[str, ...]] = {}
    for group in SYNONYMS:
        words = list(dict.fromkeys(_stem(w) for w in group.split()))
        for w in words:
            out[w] = tuple(dict.fromkeys([*out.get(w, ()), *(x for x in words if x != w)]))
    return out


@functools.cache
def _plain() -> dict[str, str]:
    """Stemmed word -> the first word of its :data:`SYNONYMS` group, when not that word."""
    out: dict[str, str] = {}
    for group in SYNONYMS:
        head, *rest = group.split()
        for word in rest:
            if _stem(word) != _stem(head):
                out.setdefault(_stem(word), head)
    return out


def plain_query(query: str) -> str:
    """What ``query`` asks for (:func:`~codemode.tools.vocabulary.canonical`: values
    replaced by their kind) plus the plain word of each of its words that has a synonym
    group ("how much did we spend" -> "... cost"): a rewrite for rankers that take text,
    not tokens (the benchmark's embeddings)."""
    plain = _plain()
    text = canonical(query)[0]
    extra = [plain[t] for t in dict.fromkeys(tokenize(text)) if t in plain]
    return " ".join([text, *extra]) if extra else text


def first_paragraph(text: str, limit: int = 400) -> str:
    para = text.strip().split("\n\n", 1)[0]
    para = " ".join(para.split())
    return para if len(para) <= limit else para[: limit - 3].rstrip() + "..."


def render(doc: ToolDoc, detail: Detail) -> dict[str, Any]:
    """One result at ``detail``: ``name`` < ``description`` (+ signature) < ``full`` (+ schemas)."""
    out: dict[str, Any] = {"name": doc.name}
    if doc.original != doc.name:
        out["original"] = doc.original
    if detail == "name":
        return out
    if detail == "description":
        out["description"] = first_paragraph(doc.description)
        out["signature"] = doc.signature
        return out
    out["description"] = doc.description
    out["signature"] = doc.signature
    out["input_schema"] = doc.input_schema or {"type": "object", "properties": {}}
    out["output_schema"] = doc.output_schema
    return out


def check_detail(detail: str) -> Detail:
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {', '.join(DETAILS)}, not {detail!r}")
    return detail


class ToolIndex:
    """Ranks ``ToolDoc``s for a query; falls back to close names when BM25 finds nothing."""

    def __init__(self, docs: Iterable[ToolDoc]) -> None:
        self.docs: dict[str, ToolDoc] = {d.name: d for d in docs}
        docs_ = list(self.docs.values())
        corpus = [d.tokens() for d in docs_]
        parts = compound_parts(corpus)
        corpus = [tokens + [p for t in tokens for p in parts.get(t, ())] for tokens in corpus]
        self._index: LexicalIndex[str] = LexicalIndex(
            [(d.name, "") for d in docs_], tokens=corpus, related=_synonyms()
        )
        self._names = [set(d.name_words()) for d in docs_]
        self._cover: tuple[dict[str, Any], Any] | None = None

    def __len__(self) -> int:
        return len(self.docs)

    def scored(self, query: str, limit: int = 10) -> list[tuple[ToolDoc, float]]:
        """The BM25 hits with their scores, best first (for fusing with other rankers)."""
        intent, values = canonical(query)
        words = self._index.words(intent)
        scores = self._index.scores(words, weak=values)
        if scores is None:
            return []
        scores = scores + self._name_cover(words, scores)
        return [(self.docs[k], s) for k, s in self._index.top(scores, limit)]

    def _name_cover(self, words: Sequence[str], scores: Any) -> Any:
        """:data:`NAME_COVER_WEIGHT` of the best score times the share of each matching
        tool's name the query covers (its words 1, their synonyms :data:`NAME_COVER_RELATED`)."""
        import numpy as np

        if self._cover is None:  # name word -> positions of the tools whose name has it
            holders: dict[str, list[int]] = {}
            for i, names in enumerate(self._names):
                for w in names:
                    holders.setdefault(w, []).append(i)
            sizes = np.array([len(n) or 1 for n in self._names], dtype=float)
            self._cover = {w: np.array(v) for w, v in holders.items()}, sizes
        holders_, sizes_ = self._cover
        covered = np.zeros(len(scores))
        own = set(words)
        related = {r for w in own for r in _synonyms().get(w, ())} - own
        for group, weight in ((own, 1.0), (related, NAME_COVER_RELATED)):
            for w in group & holders_.keys():
                covered[holders_[w]] += weight
        share = np.minimum(covered / sizes_, 1.0)
        return NAME_COVER_WEIGHT * float(scores.max()) * share * (scores > 0)

    def search(self, query: str, limit: int = 10) -> list[ToolDoc]:
        if limit <= 0:
            return []
        if not query.strip():
            return [self.docs[k] for k in sorted(self.docs)[:limit]]
        hits = self.scored(query, limit)
        if hits:
            return [d for d, _ in hits]
        # No shared word: a typo or partial name. Match on names instead.
        needle = query.strip().lower().replace("-", "_").replace(" ", "_")
        names = list(self.docs)
        sub = [n for n in names if needle in n.lower()][:limit]
        if sub:
            return [self.docs[n] for n in sub]
        tails = {n.partition(".")[2]: n for n in names}
        close = difflib.get_close_matches(needle, list(tails), n=limit, cutoff=0.7)
        return [self.docs[tails[c]] for c in close]
