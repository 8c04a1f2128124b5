"""What every use case of the service shares: the store, the embedders, the indexes, and where a question is ranked.

``Service`` (``kb/service.py``) is its three use cases over this one state: writing records
(``kb/writing.py``), searching them as tools do (``kb/searching.py``) and asking as Azure does
(``kb/asking.py``).  Each is a class over ``ServiceBase``, so the state is built once and each file
holds one use case.  ``query_space`` is the one query-preparation step they share: which index (the
knowledge base's, or its view in the multilingual space), which embedder reads the question, and which
calibration reads its features.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Callable, Concatenate, ParamSpec, TypeVar

import numpy as np

from openqna import settings
from openqna.index.analyze import cjk_share
from openqna.index.index_cache import IndexCache, engine_search
from openqna.index.memindex import MemIndex
from openqna.kb import near_topic_setting
from openqna.kb.catalog import Catalog, embedder_of
from openqna.kb.connected_search import ConnectedTables
from openqna.models.embedder import Embedder, spec_named, spec_of
from openqna.ranking import calibrations
from openqna.ranking.calibrations import Calibration
from openqna.ranking.multilingual import MultilingualSpace, crosses
from openqna.records import Conflict
from openqna.store import Project, Store
from openqna.store.base import LIVE
from openqna.training.adapter import QueryAdapter
from openqna.training.model import TrainedModels
from openqna.turns import Turns

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="ServiceBase")


def taking_turns(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """``method`` run in a turn of the threads that ask the service (``Service.turns``)."""

    @functools.wraps(method)
    def in_turn(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.turns is None:
            return method(self, *args, **kwargs)
        with self.turns.held():
            return method(self, *args, **kwargs)

    return in_turn


def started_with(embedder: str) -> str:
    """How to start a server with the embedder named ``embedder``: its ``OPENQNA_EMBEDDER`` value when it is a bundled
    model, the endpoint's settings for an OpenAI-compatible one's."""
    spec = spec_named(embedder)
    if spec:
        return f"start the server with OPENQNA_EMBEDDER={spec}"
    if embedder.startswith("openai:"):
        return (f"start the server with OPENQNA_EMBEDDER=openai and OPENQNA_EMBEDDINGS_MODEL="
                f"{embedder.removeprefix('openai:')} at the endpoint that serves it")
    return f"start the server with the embedder '{embedder}'"


@dataclass(frozen=True)
class QuerySpace:
    """Where one question is ranked: the index, the embedder that reads the question, the calibration.

    In the multilingual space (``multilingual``) the index is the knowledge base's view there, already
    holding only the records a store-side filter would keep, so no filter is pushed to the store.
    """

    index: MemIndex
    embedder: Embedder
    reads_cjk: bool
    calibration: Calibration
    multilingual: bool
    adapter: QueryAdapter | None = None  # the project's trained query adapter for this space (``openqna train``)
    crossing: bool = False  # the question is in another language than most of the records (``multilingual.crosses``)

    def mapped(self, vectors: np.ndarray) -> np.ndarray:
        """Query vectors as this space ranks them: through the trained adapter, when the project has one."""
        return vectors if self.adapter is None else self.adapter.apply(vectors)


class ServiceBase(Catalog):
    def __init__(self, store: Store, embedder: Embedder, multilingual: Embedder | None = None,
                 use: Embedder | None = None):
        """``multilingual``: the encoder of the multilingual space (``openqna.ranking.multilingual``; default: the bundled one,
        loaded on first need); ``use``: the universal sentence encoder read beside it across languages (the same)."""
        super().__init__(store)
        # Threads that ask at once (a server's query pool) take turns at their Python work, one per two cores as
        # the embedding workers, and give the turn up while they wait for the model (``openqna.turns``):
        # a server of bench/throughput.py's 10,000 QnAs at concurrency 16, 1.01-1.13x the requests/s and a lower
        # p99 in each of eight paired runs.  A remote store's reads give the turn up while they wait on the
        # network (``PostgresStore._conn``).
        self.turns = Turns(max(1, (os.cpu_count() or 1) // 2))
        self.embedder = embedder
        self.multilingual = MultilingualSpace(embedder, multilingual, use)
        self.indexes = IndexCache(store, nearest=engine_search(store))
        self.connected = ConnectedTables(store, embedder)
        self.trained = TrainedModels(lambda project, deployment: _trained_bytes(store, project, deployment),
                                     lambda: settings.trained_max_mb() * 1024 * 1024)

    def check_embedder(self, project: Project, deployment: str = LIVE) -> None:
        """Vectors from two embedders live in different spaces: never mix or compare them.  A deployment holds the
        vectors it was deployed with (``embedder_of``): `openqna reembed` changes the live state's alone."""
        built = embedder_of(project, deployment)
        if not built or built == self.embedder.name:
            return
        spec = spec_of(self.embedder)
        run = f"`{'OPENQNA_EMBEDDER=' + spec + ' ' if spec else ''}openqna reembed {project.name}`"
        if deployment != LIVE and built != project.embedder:
            raise Conflict(f"Deployment '{deployment}' of project '{project.name}' holds the vectors of embedder "
                           f"'{built}' (it was deployed before the project was re-embedded), this server runs "
                           f"'{self.embedder.name}': deploy the project to '{deployment}' again to serve it here.")
        # a server started with the model a project was re-embedded from: re-embedding with its own would undo that
        raise Conflict(f"Project '{project.name}' was built with embedder '{built}', this server runs "
                       f"'{self.embedder.name}': serve it with its own ({started_with(built)}), or re-embed it with "
                       f"this server's ({run}, then deploy it again to update its deployments).")

    @property
    def reads_cjk(self) -> bool:
        """Whether the embedder reads Chinese, Japanese and Korean (the bundled MiniLM does not)."""
        return getattr(self.embedder, "reads_cjk", True)

    @property
    def shipped_calibration(self) -> calibrations.Calibration:
        """The ranker's calibration for this service's embedder, as fitted on development data."""
        return calibrations.calibration_for(self.embedder.name)

    def calibration(self, project: Project) -> calibrations.Calibration:
        """The project's confidence calibration: the shipped one, with ``openqna calibrate``'s fit if it has one, and
        the project's near-topic share if it chose one (``kb/near_topic_setting.py``).  Read on every question: a project
        that chose neither gets the shipped object itself."""
        fitted = project.settings.get("calibration")
        c = self.shipped_calibration if not fitted else \
            calibrations.rescaled(self.shipped_calibration, float(fitted["scale"]), float(fitted["shift"]))
        return with_near_topic(c, project)

    def query_space(self, index: MemIndex, question: str, calibration: Calibration | None = None, *,
                    project: str | None = None, deployment: str | None = None,
                    across: bool | None = None) -> QuerySpace:
        """Where ``question`` is ranked: the multilingual space (with its own calibration, or the cross-lingual one)
        for a Chinese, Japanese or Korean question asked of a knowledge base that has it, and for any question of a
        KB of mostly CJK records that has it (``MultilingualSpace.index_for``), else ``index`` read by this service's embedder with
        ``calibration`` (None: ``project``'s own, ``calibration(project)``).  With ``deployment`` (and ``project``),
        the space carries the deployment's trained adapter for it, if it has one.  ``across``: whether the question
        is read across languages in the space (None: when it crosses them, ``multilingual.crosses``; True or False:
        so, for the records in another language than the question's, or in its own, ``Asking.rank``; False, for a
        question without CJK text: by this service's embedder, as the records of an English KB are read)."""
        model = None if project is None or deployment is None else self.trained.get(project, deployment,
                                                                                    index.version)
        # as one language, a question without CJK text reads its records (the English ones of a mostly Chinese KB)
        # as an English KB's are read, by this service's embedder
        view = None if across is False and cjk_share(question) == 0 else self.multilingual.index_for(index, question)
        if view is not None:
            embedder = self.multilingual.embedder
            fitted = calibrations.MULTILINGUAL
            crossing = crosses(index, question) if across is None else across
            if crossing:  # E5's vectors beside the universal sentence encoder's, where it has both
                both = index.crossing()
                view, embedder, fitted = (view, embedder, calibrations.CROSSLINGUAL_E5) if both is None else (
                    both, self.multilingual.crossing, calibrations.CROSSLINGUAL)
            if project is not None or calibration is not None:  # the project's near-topic share holds here too
                near = (calibration if calibration is not None else self.calibration(self.store.get_project(project))
                        ).near_topic
                fitted = fitted if near is None else replace(fitted, near_topic=near)
            return QuerySpace(view, embedder, True, fitted, multilingual=True,
                              adapter=None if model is None else model.adapter_for(embedder.name), crossing=crossing)
        if calibration is None:
            if project is None:
                raise ValueError("query_space needs a calibration or the project to read it from")
            calibration = self.calibration(self.store.get_project(project))
        return QuerySpace(index, self.embedder, self.reads_cjk, calibration, multilingual=False,
                          adapter=None if model is None else model.adapter_for(self.embedder.name))


def with_near_topic(c: Calibration, project: Project) -> Calibration:
    """``c`` carrying ``project``'s near-topic share, when it chose one (``kb/near_topic_setting.py``)."""
    near = near_topic_setting.of(project)
    return c if near is None else replace(c, near_topic=near)


def _trained_bytes(store: Store, project: str, deployment: str) -> bytes | None:
    trained = store.get_trained(project, deployment)
    return None if trained is None else trained.data
