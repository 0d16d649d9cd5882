"""The LangChain compressor and the LlamaIndex postprocessor, each in a small retrieval chain of its real framework
(langchain-core, llama-index-core), offline: an in-memory vector index over the real HotpotQA paragraphs of three
test questions, embedded by the shipped model's own MiniLM embedder.  What they keep must be exactly what
``ShapleyPruner.prune`` keeps of the same sentences, and each bad input is one clear error."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("langchain_core", reason="the langchain extra: pip install -e '.[langchain]'")
pytest.importorskip("llama_index.core", reason="the llamaindex extra: pip install -e '.[llamaindex]'")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.llms.mock import MockLLM  # noqa: E402
from llama_index.core.schema import ImageNode, IndexNode, MetadataMode, NodeWithScore, TextNode  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from scp.data.datasets import load_dataset  # noqa: E402
from scp.data.embed_stage import embed_into_cache  # noqa: E402
from scp.data.embedders import CachedEmbedder, Embedder, get_embedder, text_key  # noqa: E402
from scp.data.text import split_sentences  # noqa: E402
from scp.errors import InputError, InputTypeError  # noqa: E402
from scp.integrations.documents import (  # noqa: E402
    EMBED_PROGRESS_FROM,
    MODES,
    PROGRESS_FROM,
    looks_english,
    prune_documents,
    split_text,
)
from scp.integrations.langchain import SCPDocumentCompressor  # noqa: E402
from scp.integrations.llama_index import SCPNodePostprocessor  # noqa: E402
from scp.paths import SHIPPED_MODEL  # noqa: E402
from scp.pruning.pruner import ShapleyPruner  # noqa: E402

K = 6  # paragraphs retrieved per question


@pytest.fixture(scope="module")
def pruner():
    return ShapleyPruner.from_checkpoint(SHIPPED_MODEL, n_permutations=20)


@pytest.fixture(scope="module")
def corpus():
    """(title, text) of every paragraph of three HotpotQA test questions, and the questions."""
    examples = load_dataset("hotpotqa", split="test", limit=3)
    paragraphs: dict = {}
    for ex in examples:
        for pid, title, unit in zip(ex.paragraph_ids, ex.titles, ex.units):
            paragraphs.setdefault((ex.id, pid), [title, []])[1].append(unit)
    return [(title, " ".join(units)) for title, units in paragraphs.values()], [ex.query for ex in examples]


class LangChainMiniLM(Embeddings):
    def __init__(self, embedder):
        self.embedder = embedder

    def embed_documents(self, texts):
        return self.embedder.encode(list(texts)).tolist()

    def embed_query(self, text):
        return self.embed_documents([text])[0]


class LlamaIndexMiniLM(BaseEmbedding):
    embedder: object = None

    def _get_text_embedding(self, text):
        return self.embedder.encode([text])[0].tolist()

    def _get_query_embedding(self, query):
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query):
        return self._get_text_embedding(query)


def reference(pruner, query, docs, **criterion):
    """(kept sentence indices, sentence scores) per document, from ShapleyPruner.prune on all the documents'
    "Title: sentence" units joined into one context."""
    split = [split_sentences(text) for _, text in docs]
    titles = [title for (title, _), sentences in zip(docs, split) for _ in sentences]
    result = pruner.prune(query, [s for d in split for s in d], titles=titles, **criterion)
    kept, out, start = set(result.kept_indices), [], 0
    for d in split:
        span = range(start, start + len(d))
        out.append(([i - start for i in span if i in kept], [result.scores[i] for i in span]))
        start += len(d)
    return out


def check_pruned(texts, records, expected, kept_texts):
    """Each kept document: the record's kept sentences are the reference's, its text is them joined, its scores
    are the reference's, and kept + removed are all its sentences."""
    for text, record, (keep, scores), kept_text in zip(texts, records, expected, kept_texts):
        sentences = split_sentences(text)
        assert record["kept_sentences"] == keep
        assert np.allclose(record["scores"], scores, rtol=0, atol=1e-12)
        assert kept_text == " ".join(sentences[i] for i in keep)
        assert sorted(record["kept_sentences"] + record["removed_sentences"]) == list(range(len(sentences)))


def test_langchain_compressor_in_a_retrieval_chain_keeps_what_the_pruner_keeps(pruner, corpus):
    paragraphs, queries = corpus
    store = InMemoryVectorStore.from_texts(
        [text for _, text in paragraphs],
        LangChainMiniLM(pruner.embedder),
        metadatas=[{"title": title, "source": "hotpotqa"} for title, _ in paragraphs],
    )
    compressor = SCPDocumentCompressor(pruner=pruner, keep_ratio=0.3)
    retrieve = {"docs": store.as_retriever(search_kwargs={"k": K}), "query": RunnablePassthrough()}
    chain = retrieve | RunnableLambda(lambda x: (x["docs"], compressor.compress_documents(x["docs"], x["query"])))
    retrieved, kept = chain.invoke(queries[0])
    assert len(retrieved) == K and all("scp" not in d.metadata for d in retrieved)  # inputs untouched
    docs = [(d.metadata["title"], d.page_content) for d in retrieved]
    expected = reference(pruner, queries[0], docs, keep_ratio=0.3)
    n = sum(len(split_sentences(text)) for _, text in docs)
    assert sum(len(keep) for keep, _ in expected) == math.ceil(0.3 * n)
    survivors = [i for i, (keep, _) in enumerate(expected) if keep]
    assert len(kept) == len(survivors) > 0
    assert [d.metadata["title"] for d in kept] == [docs[i][0] for i in survivors]
    assert all(d.metadata["source"] == "hotpotqa" for d in kept)  # the retriever's metadata stays
    assert all(
        d.metadata["scp"]["mode"] == "joined" and d.metadata["scp"]["criterion"] == "keep_ratio=0.3" for d in kept
    )
    check_pruned(
        [docs[i][1] for i in survivors],
        [d.metadata["scp"] for d in kept],
        [expected[i] for i in survivors],
        [d.page_content for d in kept],
    )


def test_langchain_per_document_mode_plays_one_game_per_document(pruner, corpus):
    paragraphs, queries = corpus
    docs = [Document(page_content=text, metadata={"title": title}) for title, text in paragraphs[:3]]
    kept = SCPDocumentCompressor(pruner=pruner, top_k=1, mode="per_document").compress_documents(docs, queries[0])
    assert len(kept) == 3  # top-k per document: each keeps one sentence
    for doc, source in zip(kept, paragraphs[:3]):
        (expected,) = reference(pruner, queries[0], [source], top_k=1)
        check_pruned([source[1]], [doc.metadata["scp"]], [expected], [doc.page_content])


def test_llama_index_postprocessor_in_a_query_engine_keeps_what_the_pruner_keeps(pruner, corpus):
    paragraphs, queries = corpus
    nodes = [TextNode(text=text, metadata={"title": title}) for title, text in paragraphs]
    index = VectorStoreIndex(nodes, embed_model=LlamaIndexMiniLM(embedder=pruner.embedder))
    post = SCPNodePostprocessor(pruner=pruner, token_budget=60)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=K, node_postprocessors=[post])
    response = engine.query(queries[1])
    retrieved = index.as_retriever(similarity_top_k=K).retrieve(queries[1])
    docs = [(n.node.metadata["title"], n.node.get_content(metadata_mode=MetadataMode.NONE)) for n in retrieved]
    expected = reference(pruner, queries[1], docs, token_budget=60)
    survivors = [i for i, (keep, _) in enumerate(expected) if keep]
    kept = response.source_nodes
    assert [n.node.metadata["title"] for n in kept] == [docs[i][0] for i in survivors]
    assert [n.score for n in kept] == [retrieved[i].score for i in survivors]  # the retriever's scores stay
    check_pruned(
        [docs[i][1] for i in survivors],
        [n.node.metadata["scp"] for n in kept],
        [expected[i] for i in survivors],
        [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in kept],
    )
    for n in kept:  # the record is for the program, not for the LLM or the embedder
        assert "kept_sentences" not in n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "kept_sentences" not in n.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert all("scp" not in n.node.metadata for n in retrieved)  # the index's nodes untouched


def test_every_bad_input_is_one_clear_error(pruner):
    with pytest.raises(InputError, match="exactly one of top_k, keep_ratio"):
        SCPDocumentCompressor(pruner=pruner, keep_ratio=0.5, top_k=3)
    with pytest.raises(InputError, match="keep_ratio must be a number in"):
        SCPNodePostprocessor(pruner=pruner, keep_ratio=1.5)
    with pytest.raises(InputError, match="mode must be one of joined, per_document"):
        SCPDocumentCompressor(pruner=pruner, mode="paragraphs")
    with pytest.raises(ValidationError, match="mode must be one of joined, per_document"):  # not through __init__
        SCPDocumentCompressor.model_validate({"pruner": pruner, "mode": "paragraphs"})
    compressor = SCPDocumentCompressor(pruner=pruner)
    assert compressor.keep_ratio == 0.5 and compressor.compress_documents([], "a question") == []
    with pytest.raises(InputError, match="query must be a non-empty string"):
        compressor.compress_documents([Document(page_content="One fact. Another.")], "")
    with pytest.raises(InputError, match="needs the query"):
        SCPNodePostprocessor(pruner=pruner).postprocess_nodes([NodeWithScore(node=TextNode(text="A fact."))])


class KeepFirst:
    """A pruner that keeps each context's first sentence, noting its games (no network: these tests are about
    what the adapters pass it and give back)."""

    def __init__(self):
        self.games = []

    def prune(self, query, sentences, titles=None, **criterion):
        self.games.append(list(sentences))
        return SimpleNamespace(kept_indices=[0], scores=[1.0] * len(sentences), criterion="top_k=1")


ADAPTERS = [SCPDocumentCompressor, SCPNodePostprocessor]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
@pytest.mark.parametrize(
    "fields, error, message",
    [
        ({"top_k": True}, InputError, "top_k must be an integer ≥ 1; got True"),  # pydantic alone reads both as 1
        ({"top_k": 1.0}, InputError, "top_k must be an integer ≥ 1; got 1.0"),
        ({"keep_ratio": True}, InputError, "keep_ratio must be a number in (0, 1]; got True"),
        ({"token_budget": 10.0}, InputError, "token_budget must be a non-negative integer; got 10.0"),
        ({"pruner": None}, InputTypeError, "pruner must be a ShapleyPruner (ShapleyPruner.from_checkpoint(path)"),
        ({"pruner": "models/scp.safetensors"}, InputTypeError, "pruner must be a ShapleyPruner"),
        ({"mode": 3}, InputError, "mode must be one of joined, per_document; got 3"),
        ({"progress": "yes"}, InputTypeError, "progress must be True, False or None"),
        ({"title_key": 1}, InputTypeError, "title_key must be a metadata key (str) or None"),
        ({"empty": "skip"}, InputError, "empty must be one of drop, raise, keep"),
    ],
)
def test_adapter_arguments_are_checked_as_prune_checks_them(adapter, fields, error, message):
    with pytest.raises(error) as info:
        adapter(**{"pruner": KeepFirst(), **fields})
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1
    wrapped = ValueError if issubclass(error, ValueError) else TypeError  # pydantic wraps a ValueError, not a TypeError
    with pytest.raises(wrapped, match="must be"):  # model_validate, which skips __init__
        adapter.model_validate({"pruner": KeepFirst(), **fields})


def test_what_is_no_document_is_one_clear_error():
    compressor = SCPDocumentCompressor(pruner=KeepFirst())
    for documents, message in [
        (["One fact. Another."], "documents[0] is a str, not a langchain Document (wrap a text as Document("),
        ("One fact. Another.", "documents must be a list of langchain Document, not a str"),
        ([Document(page_content="A."), None], "documents[1] is a NoneType, not a langchain Document"),
    ]:
        with pytest.raises(InputTypeError) as info:
            compressor.compress_documents(documents, "q?")
        assert message in str(info.value)
    doc = Document(page_content="One fact. Another.")
    doc.metadata = None  # LangChain validates it on construction only
    with pytest.raises(InputTypeError, match=r"documents\[0\]\.metadata must be a dict .*got None"):
        compressor.compress_documents([doc], "q?")
    with pytest.raises(InputError, match="query must be a non-empty string"):
        compressor.compress_documents([Document(page_content="  ")], None)
    post = SCPNodePostprocessor(pruner=KeepFirst())
    for nodes, message in [
        ([TextNode(text="A fact.")], "nodes[0] is a TextNode, not a NodeWithScore (wrap a node as NodeWithScore("),
        (["A fact."], "nodes[0] is a str, not a NodeWithScore"),
        ([NodeWithScore(node=TextNode.model_construct(text="A. B.", metadata=None))], "nodes[0].node.metadata"),
    ]:
        with pytest.raises(InputTypeError) as info:
            post.postprocess_nodes(nodes, query_str="q?")
        assert message in str(info.value)


def test_empty_documents_kept_on_request_and_nodes_that_are_not_plain_text_pass_through_unchanged():
    pruner = KeepFirst()
    docs = [Document(page_content=""), Document(page_content="One fact. Another."), Document(page_content=" \n")]
    kept = SCPDocumentCompressor(pruner=pruner, top_k=1, empty="keep").compress_documents(docs, "q?")
    assert kept[0] is docs[0] and kept[2] is docs[2] and kept[1].page_content == "One fact."
    assert pruner.games == [["One fact.", "Another."]]  # the empty documents are in no game
    pruner = KeepFirst()
    nodes = [
        NodeWithScore(node=ImageNode(image="aGVsbG8=", text="A caption. Another."), score=0.9),
        NodeWithScore(node=IndexNode(text="", index_id="other-index"), score=0.8),
        NodeWithScore(node=IndexNode(text="A summary. Of an index.", index_id="other"), score=0.7),
        NodeWithScore(node=TextNode(text="   "), score=0.6),
        NodeWithScore(node=TextNode(text="One fact. Two facts."), score=0.5),
    ]
    post = SCPNodePostprocessor(pruner=pruner, top_k=1, mode="per_document", empty="keep")
    out = post.postprocess_nodes(nodes, query_str="q?")
    assert len(out) == 5 and all(a is b for a, b in zip(out[:4], nodes[:4]))
    assert out[4].node.get_content(metadata_mode=MetadataMode.NONE) == "One fact." and out[4].score == 0.5
    assert pruner.games == [["One fact.", "Two facts."]]
    with pytest.raises(InputError, match="^node 1 has no text to prune"):  # the shared step names what it prunes
        prune_documents(KeepFirst(), "q?", ["A.", " "], item="node")


def test_an_empty_document_is_dropped_with_a_warning_or_refused_on_request():
    docs = [Document(page_content=" "), Document(page_content="One fact. Another."), Document(page_content="")]
    with pytest.warns(UserWarning) as caught:
        kept = SCPDocumentCompressor(pruner=KeepFirst(), top_k=1).compress_documents(docs, "q?")
    assert [d.page_content for d in kept] == ["One fact."]  # the chain goes on without them
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("dropped 2 documents with no text to prune (empty or only whitespace) at 0, 2;")
    assert len(message.splitlines()) == 1
    with pytest.warns(UserWarning, match="dropped 2 documents"):  # all empty: nothing to prune, nothing left
        assert SCPDocumentCompressor(pruner=KeepFirst()).compress_documents([docs[0], docs[2]], "q?") == []
    with pytest.raises(InputError) as info:
        SCPDocumentCompressor(pruner=KeepFirst(), empty="raise").compress_documents(docs, "q?")
    assert str(info.value).startswith("document 0 has no text to prune (empty or only whitespace); drop it first")
    nodes = [
        NodeWithScore(node=ImageNode(image="aGVsbG8=", text=""), score=0.9),  # not a text node: passes through
        NodeWithScore(node=TextNode(text="One fact. Two facts."), score=0.5),
        NodeWithScore(node=TextNode(text="\u200b "), score=0.4),
    ]
    with pytest.warns(UserWarning, match=r"^dropped 1 node with no text to prune \(empty or only whitespace\) at 2;"):
        out = SCPNodePostprocessor(pruner=KeepFirst(), top_k=1).postprocess_nodes(nodes, query_str="q?")
    assert len(out) == 2 and out[0] is nodes[0] and out[1].node.get_content() == "One fact."
    with pytest.raises(InputError, match="^node 2 has no text to prune"):
        SCPNodePostprocessor(pruner=KeepFirst(), empty="raise").postprocess_nodes(nodes, query_str="q?")


@pytest.mark.parametrize("adapter, item", [(SCPDocumentCompressor, "document"), (SCPNodePostprocessor, "node")])
def test_messages_name_what_the_adapter_prunes(adapter, item):
    other = "node" if item == "document" else "document"
    for fields in ({"empty": "skip"}, {"progress": 1}):
        with pytest.raises((InputError, InputTypeError)) as info:
            adapter(pruner=KeepFirst(), **fields)
        assert f" {item}" in str(info.value) and other not in str(info.value)
    with pytest.raises(InputError, match="^empty must be one of drop, raise, keep"):
        adapter(pruner=KeepFirst(), empty=None)
    texts = ["One fact. Another.", "東京は日本の首都です。大阪は大きな都市です。京都には古い寺がたくさんあります。"]
    with pytest.warns(UserWarning) as caught:
        if adapter is SCPDocumentCompressor:
            adapter(pruner=KeepFirst()).compress_documents([Document(page_content=t) for t in texts], "q?")
        else:
            nodes = [NodeWithScore(node=TextNode(text=t)) for t in texts]
            adapter(pruner=KeepFirst()).postprocess_nodes(nodes, query_str="q?")
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"1 of 2 {item}s do not look English ({item} 1: under 50% of their letters are a-z)")
    assert other not in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_per_document_mode_shows_its_progress_over_many_documents(adapter, capsys):
    n = PROGRESS_FROM + 50
    if adapter is SCPDocumentCompressor:
        items = [Document(page_content=f"Fact {i}. More.") for i in range(n)]
        call = lambda a, xs: a.compress_documents(xs, "q?")  # noqa: E731
    else:
        items = [NodeWithScore(node=TextNode(text=f"Fact {i}. More.")) for i in range(n)]
        call = lambda a, xs: a.postprocess_nodes(xs, query_str="q?")  # noqa: E731
    assert len(call(adapter(pruner=KeepFirst(), top_k=1, mode="per_document"), items)) == n
    err = capsys.readouterr().err
    assert "scp per_document" in err and f"{n}/{n}" in err
    call(adapter(pruner=KeepFirst(), top_k=1, mode="per_document"), items[: PROGRESS_FROM - 1])
    call(adapter(pruner=KeepFirst(), top_k=1, mode="per_document", progress=False), items)
    call(adapter(pruner=KeepFirst(), top_k=1), items)  # one game: no bar
    assert "scp per_document" not in capsys.readouterr().err


def test_chinese_and_japanese_text_is_split_at_its_own_sentence_ends(corpus):
    assert split_text("东京是日本的首都。大阪是一个大城市！京都有很多寺庙吗？有的。") == [
        "东京是日本的首都。",
        "大阪是一个大城市！",
        "京都有很多寺庙吗？",
        "有的。",
    ]
    assert split_text("「行こう。」と彼は言った。「はい！」彼女は答えた．") == [
        "「行こう。」と彼は言った。",  # a quoted sentence stays in the sentence that quotes it
        "「はい！」彼女は答えた．",
    ]
    unclosed = ["彼は「本当に？", "と言った。", "次の文。"]  # an opening 「 with no 」 is ignored
    assert split_text("".join(unclosed)) == unclosed
    assert split_text("円周率は３．１４です．次の文。") == ["円周率は３．１４です．", "次の文。"]  # a decimal point
    assert split_text("Tokyo（東京。首都）is big. It is old.") == ["Tokyo（東京。首都）is big.", "It is old."]
    for _, text in corpus[0]:  # English splits as split_sentences splits it
        assert split_text(text) == split_sentences(text)
    pruner = KeepFirst()
    with pytest.warns(UserWarning, match="do not look English"):
        SCPDocumentCompressor(pruner=pruner, top_k=1).compress_documents(
            [Document(page_content="东京是日本的首都。大阪是一个大城市。京都有很多寺庙，也有很多游客。")], "q?"
        )
    assert pruner.games == [["东京是日本的首都。", "大阪是一个大城市。", "京都有很多寺庙，也有很多游客。"]]


def test_english_guess_is_cheap_and_documented():
    assert looks_english("Shawn Levy directed Free Guy. It stars Ryan Reynolds.")
    assert looks_english("Où est la bibliothèque? Elle est près de la gare, à côté du café.")  # Latin letters pass
    assert not looks_english("Москва — столица России, крупнейший город страны.")
    assert looks_english("東京。")  # too short to judge
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # English documents draw no warning
        SCPDocumentCompressor(pruner=KeepFirst()).compress_documents([Document(page_content="One. Two.")], "q?")


@pytest.mark.parametrize("mode", MODES)
def test_identical_documents_are_scored_once_and_come_back_alike(pruner, corpus, mode):
    paragraphs, queries = corpus
    title, text = paragraphs[0]
    docs = [Document(page_content=text, metadata={"title": title, "copy": i}) for i in range(3)]
    kept = SCPDocumentCompressor(pruner=pruner, keep_ratio=0.5, mode=mode).compress_documents(docs, queries[0])
    assert [d.metadata["copy"] for d in kept] == [0, 1, 2]  # each copy keeps its own metadata
    assert len({d.page_content for d in kept}) == 1
    assert all(d.metadata["scp"] == kept[0].metadata["scp"] for d in kept)
    ((keep, scores),) = reference(pruner, queries[0], [(title, text)], keep_ratio=0.5)  # as if it came once
    check_pruned([text] * 3, [d.metadata["scp"] for d in kept], [(keep, scores)] * 3, [d.page_content for d in kept])
    fake = KeepFirst()
    nodes = [NodeWithScore(node=TextNode(text="One fact. Another."), score=s) for s in (0.9, 0.8)]
    nodes.append(NodeWithScore(node=TextNode(text="One fact.  Another."), score=0.7))  # the same sentences
    out = SCPNodePostprocessor(pruner=fake, top_k=1, mode=mode).postprocess_nodes(nodes, query_str="q?")
    assert fake.games == [["One fact.", "Another."]] and [n.score for n in out] == [0.9, 0.8, 0.7]


def test_langchain_documents_carry_a_relevance_score(pruner, corpus):
    paragraphs, queries = corpus
    docs = [Document(page_content=text, metadata={"title": title}) for title, text in paragraphs[:4]]
    kept = SCPDocumentCompressor(pruner=pruner, keep_ratio=0.3).compress_documents(docs, queries[0])
    assert kept
    for d in kept:
        record = d.metadata["scp"]
        total = sum(record["scores"][i] for i in record["kept_sentences"])
        assert d.metadata["relevance_score"] == record["relevance_score"] == pytest.approx(total, abs=1e-12)
        assert isinstance(d.metadata["relevance_score"], float)


def test_new_text_is_embedded_in_batches_with_the_bits_of_one_text_per_pass(pruner, tmp_path, monkeypatch):
    """New sentences go through the model in batches of one token length (embed_stage.encode_by_length), and the
    cache holds exactly the vectors one text per forward pass gives, so the scores are the pruner's own."""
    inner = pruner.embedder.embedder
    texts = [
        f"Sentence number {i} says that {w} is a city in the {d} of the country."
        for i, (w, d) in enumerate(
            [(w, d) for w in ("Lyon", "Nantes", "Lille", "Nice", "Metz") for d in ("north", "south", "east", "west")]
        )
    ]
    doc = Document(page_content=" ".join(texts), metadata={"title": "Cities"})
    query = "Which city is in the south?"
    batches = []
    forward = inner._encode
    monkeypatch.setattr(inner, "_encode", lambda t, b, p: batches.append(len(t) if b > 1 else 1) or forward(t, b, p))
    fresh = ShapleyPruner(pruner.model, pruner.config, CachedEmbedder(inner, tmp_path / "adapter"), n_permutations=20)
    (kept,) = SCPDocumentCompressor(pruner=fresh, top_k=3).compress_documents([doc], query)
    assert max(batches) > 1  # batched, not one text per forward pass
    assert fresh.embedder.n_encoded == len(texts) + 1  # every unit and the query, before the game
    units = [query] + [f"Cities: {t}" for t in texts]
    monkeypatch.setattr(inner, "_encode", forward)
    alone = [inner.encode([u]) for u in units]  # one text per forward pass
    cached = fresh.embedder.cache.get([text_key(u) for u in units])
    assert all(c.tobytes() == a[0].tobytes() for c, a in zip(cached, alone))
    own = ShapleyPruner(pruner.model, pruner.config, CachedEmbedder(inner, tmp_path / "own"), n_permutations=20)
    expected = own.prune(query, texts, titles=["Cities"] * len(texts), top_k=3)
    assert kept.metadata["scp"]["kept_sentences"] == list(expected.kept_indices)
    assert kept.metadata["scp"]["scores"] == [float(x) for x in expected.scores]  # bit for bit


class CountingEmbedder(Embedder):
    """A padded embedder with no model (a text's vector holds its length): for the embedding bar."""

    id, dim, padded = "counting", 4, True

    def _encode(self, texts, batch_size, show_progress):
        return np.array([[len(t), 1.0, 0.0, 0.0] for t in texts], dtype=np.float32)


class EmbeddingPruner(KeepFirst):
    """KeepFirst with a cached embedder and the pruner's units: what the adapters embed before the game."""

    def __init__(self, cache_dir):
        super().__init__()
        self.embedder = CachedEmbedder(CountingEmbedder(), cache_dir)

    def units(self, sentences, titles):
        return list(sentences) if titles is None else [f"{t}: {s}" for t, s in zip(titles, sentences)]


def test_a_long_document_shows_its_embedding_progress(tmp_path, capsys):
    n = EMBED_PROGRESS_FROM + 50
    long = Document(page_content=" ".join(f"Fact number {i} is here." for i in range(n)))
    pruner = EmbeddingPruner(tmp_path / "a")
    SCPDocumentCompressor(pruner=pruner, top_k=1).compress_documents([long], "q?")
    err = capsys.readouterr().err
    assert "embedding new text (counting)" in err and f"{n + 1}/{n + 1}" in err  # the sentences and the query
    assert pruner.embedder.n_encoded == n + 1
    SCPDocumentCompressor(pruner=pruner, top_k=1).compress_documents([long], "q?")  # all cached now: no bar
    short = Document(page_content="One fact. Another.")
    SCPDocumentCompressor(pruner=EmbeddingPruner(tmp_path / "b"), top_k=1).compress_documents([short], "q?")
    SCPDocumentCompressor(pruner=EmbeddingPruner(tmp_path / "c"), progress=False).compress_documents([long], "q?")
    assert "embedding new text" not in capsys.readouterr().err
    SCPDocumentCompressor(pruner=EmbeddingPruner(tmp_path / "d"), progress=True).compress_documents([short], "q?")
    assert "3/3" in capsys.readouterr().err


def test_the_compressor_in_a_contextual_compression_retriever(pruner, corpus):
    retrievers = pytest.importorskip("langchain_classic.retrievers", reason="the langchain extra")
    paragraphs, queries = corpus
    store = InMemoryVectorStore.from_texts(
        [text for _, text in paragraphs],
        LangChainMiniLM(pruner.embedder),
        metadatas=[{"title": title} for title, _ in paragraphs],
    )
    compressor = SCPDocumentCompressor(pruner=pruner, keep_ratio=0.3)
    base = store.as_retriever(search_kwargs={"k": K})
    retriever = retrievers.ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)
    kept = retriever.invoke(queries[0])
    expected = compressor.compress_documents(base.invoke(queries[0]), queries[0])
    assert kept and [d.page_content for d in kept] == [d.page_content for d in expected]
    assert [d.metadata["relevance_score"] for d in kept] == [d.metadata["relevance_score"] for d in expected]


@pytest.mark.filterwarnings("ignore:this checkpoint was trained")
def test_what_the_pruner_would_refuse_is_refused_before_anything_is_embedded(pruner, tmp_path):
    inner = pruner.embedder.embedder
    doc = Document(page_content="One fact here. Two facts here. Three facts here. Four facts here.")
    for options, message in [({"max_units": 3}, "exceeds max_units=3"), ({"max_unit_chars": 12}, "max_unit_chars=12")]:
        fresh = ShapleyPruner(pruner.model, pruner.config, CachedEmbedder(inner, tmp_path / "c"), **options)
        with pytest.raises(InputError, match=message):
            SCPDocumentCompressor(pruner=fresh, title_key=None).compress_documents([doc], "Which fact?")
        assert fresh.embedder.n_encoded == 0


def test_embed_into_cache_takes_a_cached_embedder_and_leaves_a_non_padded_one_alone(tmp_path):
    with pytest.raises(InputTypeError, match="^embedder must be a CachedEmbedder"):
        embed_into_cache(CountingEmbedder(), ["A text."])
    cached = CachedEmbedder(CountingEmbedder(), tmp_path)
    assert embed_into_cache(cached, ["A text.", "Another.", "A text."], progress=False) == 2  # distinct texts
    assert embed_into_cache(cached, ["A text.", "Another."]) == 0  # all cached
    assert (
        cached.n_encoded == 2
        and cached.encode(["Another."]).tobytes() == CountingEmbedder().encode(["Another."]).tobytes()
    )
    plain = CachedEmbedder(get_embedder("random"), tmp_path)  # not padded: batching does not change its bits
    assert embed_into_cache(plain, ["A text."]) == 0 and plain.n_encoded == 0
