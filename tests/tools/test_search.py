"""Lexical discovery: BM25 over names, descriptions and parameter names."""

from __future__ import annotations

import random

import pytest

from codemode.tools import LexicalIndex, PythonSource, ToolRegistry, ToolSpec, tokenize
from codemode.tools.search import ToolDoc, ToolIndex, compound_parts, plain_query


def test_identifiers_are_split_on_snake_camel_and_kebab_case() -> None:
    assert tokenize("get_weather-forecast") == ["get", "weather", "forecast"]
    assert tokenize("list_files read-file") == ["list", "file", "read", "file"]


def test_a_word_in_mixed_case_is_also_kept_whole() -> None:
    assert tokenize("getWeatherForecast") == ["get", "weather", "forecast", "getweatherforecast"]
    assert tokenize("HTTPServer GitHub") == ["http", "server", "httpserver", "git", "hub", "github"]


def test_a_query_names_a_product_once_whole_when_the_index_knows_it() -> None:
    idx = LexicalIndex([(1, "github tools"), (2, "git and a hub")])
    assert idx.words("GitHub issue") == ["github", "issu"]
    assert idx.words("GitLab issue") == ["git", "lab", "issu"]  # not indexed whole
    assert [k for k, _ in idx.search("GitHub", 2)] == [1]


def test_a_product_written_in_prose_meets_its_lower_case_server_name() -> None:
    tools = [doc("postgres.find", "Find records."), doc("mongodb.find", "Find records.")]
    assert idx_names(ToolIndex(tools).search("find records in MongoDB", 1)) == ["mongodb.find"]
    tools = [doc("github.get_issue", "One issue."), doc("gitlab.get_issue", "One issue.")]
    assert idx_names(ToolIndex(tools).search("get the GitHub issue", 1)) == ["github.get_issue"]


def test_plurals_and_stop_words_do_not_matter() -> None:
    assert tokenize("the files of the directories") == ["file", "directory"]


def test_the_generic_index_ranks_the_most_relevant_document_first() -> None:
    idx = LexicalIndex(
        [(1, "send an email message"), (2, "read a file from disk"), (3, "write file")]
    )
    hits = idx.search("read file", limit=5)
    assert [k for k, _ in hits][:2] == [2, 3]
    assert hits[0][1] > hits[1][1] > 0


def test_the_generic_index_handles_empty_queries_empty_corpora_and_no_match() -> None:
    idx = LexicalIndex([("a", "alpha"), ("b", "beta")])
    assert idx.search("") == []
    assert idx.search("gamma") == []
    assert idx.search("alpha", limit=0) == []
    assert LexicalIndex([]).search("alpha") == []
    assert LexicalIndex([("x", "")]).search("alpha") == []


def doc(name: str, description: str = "", params: tuple[str, ...] = ()) -> ToolDoc:
    return ToolDoc(
        name=name,
        original=name,
        description=description,
        signature_text=f"{name}()",
        parameters=params,
    )


TOOLS = [
    doc("fs.read_file", "Read the complete contents of a file.", ("path",)),
    doc("fs.write_file", "Create or overwrite a file.", ("path", "content")),
    doc("fs.list_directory", "List entries of a directory.", ("path",)),
    doc("git.git_commit", "Record changes to the repository.", ("repo_path", "message")),
    doc("time.get_current_time", "Current time in a timezone.", ("timezone",)),
    doc("mail.send", "Send an email.", ("to", "subject", "body")),
]


def test_tool_names_weigh_more_than_descriptions() -> None:
    idx = ToolIndex([*TOOLS, doc("x.other", "mentions commit once")])
    assert idx.search("commit")[0].name == "git.git_commit"


def test_a_tool_is_found_by_a_synonym_of_a_word_in_its_name() -> None:
    tools = [doc("notes.add_item", "Adds it."), doc("notes.delete_item", "Deletes it.")]
    assert idx_names(ToolIndex(tools).search("remove item", 1)) == ["notes.delete_item"]
    tools = [doc("fs.list_files", "Lists them."), doc("fs.list_directory", "Lists it.")]
    assert idx_names(ToolIndex(tools).search("list folder", 1)) == ["fs.list_directory"]


def test_a_query_word_reaches_descriptions_through_its_synonyms() -> None:
    # "delete" is nowhere in the catalog; its synonym "erase" is, in a description only.
    tools = [doc("files.keep", "Keep old entries."), doc("files.tidy", "Erase old entries.")]
    assert idx_names(ToolIndex(tools).search("delete old entries", 1)) == ["files.tidy"]
    assert idx_names(ToolIndex(tools).search("remove", 2)) == ["files.tidy"]


def test_the_users_own_word_outweighs_its_synonym() -> None:
    tools = [doc("db.one", "Delete a record."), doc("db.two", "Remove a record.")]
    hits = ToolIndex(tools).scored("remove record", 2)
    assert [d.name for d, _ in hits] == ["db.two", "db.one"]
    assert hits[0][1] > hits[1][1] > 0


def test_scored_hits_come_best_first_in_the_order_search_returns() -> None:
    idx = ToolIndex(TOOLS)
    hits = idx.scored("read the file", 3)
    assert [d for d, _ in hits] == idx.search("read the file", 3)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert hits[0][0].name == "fs.read_file"


def test_the_server_name_weighs_more_than_a_word_of_a_description() -> None:
    tools = [
        doc("jira.create_issue", "Open an issue, as on github."),
        doc("github.create_issue", "Open a new issue with a title, a body, labels, assignees."),
    ]
    assert idx_names(ToolIndex(tools).search("create issue in github", 1)) == [
        "github.create_issue"
    ]


def test_a_tool_whose_name_the_query_covers_beats_a_sibling_whose_description_matches() -> None:
    tools = [
        doc(
            "crm.create_property",
            "Create a property. Call list first to see the properties a contact has.",
        ),
        doc(
            "crm.list_properties",
            "Returns the properties of an object type, with their names and types.",
        ),
        doc("crm.get_contact", "One contact."),
        doc("crm.list_workflows", "Workflows."),
        doc("crm.update_property", "Update a property."),
    ]
    # BM25 alone ranks create_property first: its description says list, properties, contact.
    hits = ToolIndex(tools).search("list the properties of contacts", 2)
    assert idx_names(hits) == ["crm.list_properties", "crm.create_property"]


def test_name_coverage_only_reorders_tools_bm25_already_found() -> None:
    tools = [doc("a.list_items", "Items."), doc("b.other", "Nothing in common.")]
    assert idx_names(ToolIndex(tools).search("list items")) == ["a.list_items"]


def test_a_short_list_of_choices_is_searchable_and_a_long_one_is_not() -> None:
    def with_enum(name: str, values: list[str]) -> ToolDoc:
        schema = {"type": "object", "properties": {"mode": {"type": "string", "enum": values}}}
        return ToolDoc(name, name, "Change a setting.", f"{name}()", ("mode",), schema)

    tools = [
        with_enum("phone.set_orientation", ["portrait", "landscape"]),
        with_enum("geo.set_region", ["emea", "apac", "landscape", "amer", "latam"]),
        doc("phone.press_button", "Press a button."),
    ]
    assert idx_names(ToolIndex(tools).search("landscape")) == ["phone.set_orientation"]


def test_a_closed_compound_splits_into_two_words_the_corpus_uses() -> None:
    corpus = [
        ["worklog", "preview", "output"],
        ["work", "log", "view", "put"],
        ["work", "log", "pre", "out", "view", "put"],
        ["wor", "klog"],  # each seen once: fragments, not words
    ]
    assert compound_parts(corpus) == {"worklog": ("work", "log")}


def test_a_tool_named_by_a_closed_compound_is_found_by_its_open_words() -> None:
    tools = [
        doc("jira.add_worklog", "Add an entry to an issue.", ("issue_key",)),
        doc("jira.get_issue", "Get an issue.", ("issue_key",)),
        doc("hr.log_hours", "Log hours of work for payroll."),
        doc("hr.work_shift", "A work shift."),
        doc("logs.tail_log", "Tail a log."),
    ]
    assert idx_names(ToolIndex(tools).search("log work on the issue", 1)) == ["jira.add_worklog"]


def test_parameter_names_are_searchable() -> None:
    assert idx_names(ToolIndex(TOOLS).search("timezone", 1)) == ["time.get_current_time"]


def test_an_empty_query_lists_tools_by_name() -> None:
    assert idx_names(ToolIndex(TOOLS).search("  ", 2)) == ["fs.list_directory", "fs.read_file"]


def test_a_query_sharing_no_word_falls_back_to_close_names() -> None:
    idx = ToolIndex(TOOLS)
    assert idx_names(idx.search("git_comit")) == ["git.git_commit"]
    assert idx.search("zzzz qqqq") == []


def idx_names(docs: list[ToolDoc]) -> list[str]:
    return [d.name for d in docs]


def make_specs(n: int, seed: int = 7) -> list[ToolSpec]:
    rnd = random.Random(seed)
    verbs = ["get", "list", "create", "delete", "update", "search", "send", "read", "write", "sync"]
    nouns = [
        "issue",
        "file",
        "user",
        "invoice",
        "message",
        "event",
        "ticket",
        "repo",
        "order",
        "page",
    ]
    words = ["fast", "remote", "cloud", "local", "secure", "batch", "daily", "shared", "archived"]
    out = []
    for i in range(n):
        v, noun = rnd.choice(verbs), rnd.choice(nouns)
        extra = " ".join(rnd.sample(words, 3))
        out.append(
            ToolSpec(
                server=f"srv{i % 50}",
                name=f"{v}_{noun}_{i}",
                description=f"{v.capitalize()} a {noun} ({extra}).",
                input_schema={"type": "object", "properties": {f"{noun}_id": {"type": "string"}}},
            )
        )
    return out


class StaticSource:
    def __init__(self, name: str, specs: list[ToolSpec]) -> None:
        self.name = name
        self.specs = specs

    async def list_tools(self) -> list[ToolSpec]:
        return self.specs

    async def call_tool(self, tool, arguments, *, timeout=None):  # type: ignore[no-untyped-def]
        raise AssertionError("not called")

    async def aclose(self) -> None:
        pass


def registry_of(specs: list[ToolSpec]) -> ToolRegistry:
    by_server: dict[str, list[ToolSpec]] = {}
    for s in specs:
        by_server.setdefault(s.server, []).append(s)
    return ToolRegistry([StaticSource(k, v) for k, v in by_server.items()])


@pytest.mark.anyio
async def test_search_over_ten_thousand_tools_finds_the_matching_ones() -> None:
    specs = make_specs(10_000)
    specs.append(ToolSpec("billing", "refund_payment", "Refund a customer's card payment."))
    reg = registry_of(specs)
    hits = await reg.search("refund payment", limit=3)
    assert hits[0] == {"name": "billing.refund_payment"}
    hits = await reg.search("delete invoice", limit=10)
    assert len(hits) == 10
    assert all("delete_invoice" in h["name"] for h in hits)


@pytest.mark.anyio
async def test_the_registry_exposes_the_index_its_search_ranks_with() -> None:
    reg = registry_of(make_specs(30))
    index = await reg.tool_index()
    assert len(index) == 30
    best = index.scored("delete invoice", 1)[0][0]
    assert await reg.search("delete invoice", limit=1) == [{"name": best.name}]


@pytest.mark.anyio
async def test_results_grow_with_the_detail_level() -> None:
    src = PythonSource("local")

    def add(a: int, b: int = 1) -> int:
        """Add two integers.

        Longer explanation that only the full level shows.
        """
        return a + b

    src.add(add)
    reg = ToolRegistry([src])
    name = await reg.search("add", detail="name")
    desc = await reg.search("add", detail="description")
    full = await reg.search("add", detail="full")
    assert name == [{"name": "local.add"}]
    assert desc == [
        {
            "name": "local.add",
            "description": "Add two integers.",
            "signature": "local.add(a: int, *, b: int = 1) -> int",
        }
    ]
    assert full[0]["input_schema"]["required"] == ["a"]
    assert full[0]["output_schema"] == {"type": "integer"}
    assert "Longer explanation" in full[0]["description"]
    with pytest.raises(ValueError, match="detail must be one of"):
        await reg.search("add", detail="huge")


def test_a_verb_and_its_noun_or_gerund_meet_after_stemming() -> None:
    assert tokenize("stage staging") == ["stag", "stag"]
    assert tokenize("associate association") == ["associat", "associat"]


def test_a_phrasal_verb_finds_the_tool_named_by_its_plain_verb() -> None:
    tools = [doc("flags.get_flag", "One flag."), doc("flags.disable_flag", "One flag.")]
    assert idx_names(ToolIndex(tools).search("turn off the beta flag", 1)) == ["flags.disable_flag"]


def test_the_words_of_a_phrasal_verb_do_not_count_apart() -> None:
    tools = [
        doc("maps.route", "Directions with each turn of the route."),
        doc("flags.update_flag", "Update a flag: disable or enable it."),
    ]
    assert idx_names(ToolIndex(tools).search("turn off the flag")) == ["flags.update_flag"]


def test_a_value_in_the_query_counts_as_its_kind_and_weighs_less() -> None:
    tools = [doc("web.fetch_url", "Fetch it."), doc("fs.read_file", "Read it.")]
    assert idx_names(ToolIndex(tools).search("show notes.md", 1)) == ["fs.read_file"]
    tools = [doc("cfg.get_config", "Settings."), doc("fs.read_file", "Read it.")]
    assert idx_names(ToolIndex(tools).search("read config.yaml", 1)) == ["fs.read_file"]


def test_the_plain_query_adds_the_plain_word_of_each_synonym() -> None:
    assert plain_query("how much did we spend") == "how much did we spend cost"
    assert plain_query("turn on dark mode") == "enable dark mode"
    assert plain_query("read config.yaml") == "read file get"
