"""``archiver focus train``: a relevance model from example documents (see ``web.relevance``).

The examples folder holds two folders of documents: ``relevant/`` (pages on the topic the crawl
should favour) and ``other/`` (pages it should not: the more like what the crawl will meet, the
better). A file ending ``.html`` or ``.htm`` is reduced to its title, headings and body text by
``web.pagetext`` (as the crawler reduces a page it scores); one ending ``.txt`` is read as UTF-8
text; other files are skipped and counted. Sub-folders are not read.

The model is scikit-learn's logistic regression (L2, liblinear, classes weighted by their size)
on the crawler's own hashed features (``web.relevance.features_of``), so training and scoring
see the same numbers; its weights go into the model file, and the crawler scores with numpy
alone. The accuracy reported is a stratified k-fold cross-validation (k up to 5, at most the
smaller class's size); with one document in a class there is none.

This module imports scikit-learn: only the ``focus train`` verb imports it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score

from archiver.web.pagetext import page_text
from archiver.web.relevance import FEATURES, RelevanceModel, features_of

CLASSES = ("relevant", "other")
_HTML = (".html", ".htm")
_TEXT = (".txt",)
# Inverse regularisation strength: the hashed vectors have unit length, so weights need room.
_C = 10.0
_FOLDS = 5


class TrainError(ValueError):
    """Examples that cannot make a model; the message says why."""


@dataclass(frozen=True)
class Examples:
    """The texts of the example documents, per class, and how many files were skipped."""

    relevant: list[str]
    other: list[str]
    skipped: int


@dataclass(frozen=True)
class Trained:
    """A fitted model and what the report says about it."""

    model: RelevanceModel
    counts: dict[str, int]
    accuracy: float | None  # cross-validated; None with a class of one document
    folds: int
    seconds: float


def document_text(path: Path) -> str | None:
    """The text of one example file, or None for a kind of file that is not read."""
    suffix = path.suffix.lower()
    if suffix in _HTML:
        page = page_text(path.read_bytes())
        return "" if page is None else f"{page.title}\n{page.headings}\n{page.body}"
    if suffix in _TEXT:
        return path.read_bytes().decode("utf-8", "replace")
    return None


def read_examples(directory: Path) -> Examples:
    """Every example document under ``directory`` (see the module docstring), or ``TrainError``."""
    if not directory.is_dir():
        raise TrainError(f"{directory}: not a folder of examples")
    texts: dict[str, list[str]] = {}
    skipped = 0
    for name in CLASSES:
        folder = directory / name
        if not folder.is_dir():
            raise TrainError(f"{folder}: missing (the examples go in {directory}/relevant/ and "
                             f"{directory}/other/)")
        texts[name] = []
        for path in sorted(folder.iterdir()):
            text = document_text(path) if path.is_file() else None
            if text is None:
                skipped += 1
            elif text.strip():
                texts[name].append(text)
            else:
                skipped += 1
        if not texts[name]:
            raise TrainError(f"{folder}: no example document with text (.html, .htm or .txt); "
                             "a model needs examples of both classes")
    return Examples(texts["relevant"], texts["other"], skipped)


def train(examples: Examples, features: int = FEATURES, seed: int = 0) -> Trained:
    """A relevance model fitted to ``examples``, with its cross-validated accuracy."""
    started = time.monotonic()
    texts = examples.relevant + examples.other
    labels = np.array([1] * len(examples.relevant) + [0] * len(examples.other))
    matrix, used = _matrix(texts, features, seed)
    smaller = min(len(examples.relevant), len(examples.other))
    folds = min(_FOLDS, smaller)
    accuracy = None
    if folds >= 2:
        split = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        accuracy = float(cross_val_score(_classifier(), matrix, labels, cv=split).mean())
    fitted = _classifier().fit(matrix, labels)
    counts = {"relevant": len(examples.relevant), "other": len(examples.other)}
    folds = folds if accuracy is not None else 0
    trained = {"documents": counts, "accuracy": accuracy, "folds": folds,
               "method": "logistic regression (scikit-learn, liblinear, L2, C=10)"}
    weights = np.zeros(features, dtype=np.float32)
    weights[used] = fitted.coef_[0]
    model = RelevanceModel(weights, float(fitted.intercept_[0]), seed, trained)
    return Trained(model, counts, accuracy, folds, time.monotonic() - started)


def _classifier() -> LogisticRegression:
    return LogisticRegression(C=_C, solver="liblinear", class_weight="balanced")


def _matrix(texts: list[str], features: int, seed: int) -> tuple[csr_matrix, np.ndarray]:
    """The texts' hashed feature vectors as the rows of a sparse matrix over the slots some
    text uses (the solvers' time grows with the columns), and those slots: column n is slot
    ``used[n]``."""
    rows, slots, values = [], [], []
    for row, text in enumerate(texts):
        found, weights = features_of(text, features, seed)
        rows.append(np.full(len(found), row))
        slots.append(found)
        values.append(weights)
    used, columns = np.unique(np.concatenate(slots), return_inverse=True)
    matrix = csr_matrix((np.concatenate(values), (np.concatenate(rows), columns)),
                        shape=(len(texts), len(used)))
    return matrix, used
