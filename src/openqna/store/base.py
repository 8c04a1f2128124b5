"""The store protocol every engine implements and the conformance suite checks.

A store keeps projects (knowledge bases), their QnA records with analysed terms
and vectors (one unit per question and one per answer), named deployments
(snapshots of the live ``test`` state), synonyms and API keys.  Search goes
through ``search_index``, which returns an index consistent with the store at
the moment of the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..records import QnA
from ..retrieval.memindex import MemIndex

LIVE = "test"  # Azure's name for the authored, un-deployed state.


@dataclass
class Project:
    name: str
    description: str = ""
    language: str = "en"
    multilingual: bool = False
    settings: dict = field(default_factory=lambda: {"defaultAnswer": "No good match found in KB."})
    embedder: str | None = None  # name of the embedder that built this project's vectors
    created: str = ""
    modified: str = ""
    last_deployed: str | None = None

    @property
    def default_answer(self) -> str:
        return self.settings.get("defaultAnswer") or "No good match found in KB."


@dataclass
class Unit:
    """One indexed piece of a record: a question ("q") or the answer ("a")."""

    field: str
    ord: int
    terms: list[str]
    vector: np.ndarray


@dataclass
class StoredQnA:
    qna: QnA
    units: list[Unit]
    content_hash: str


@dataclass
class Deployment:
    name: str
    last_deployed: str


@dataclass
class ApiKey:
    id: str
    name: str
    role: str  # admin | author | query
    projects: list[str] | None  # None = every project
    created: str


class Store(Protocol):
    # projects
    def create_project(self, project: Project) -> Project: ...
    def get_project(self, name: str) -> Project: ...
    def list_projects(self) -> list[Project]: ...
    def update_project(self, project: Project) -> Project: ...
    def delete_project(self, name: str) -> None: ...

    # records of the live state
    def put_qnas(self, project: str, items: list[StoredQnA]) -> list[int]: ...
    def delete_qnas(self, project: str, ids: list[int]) -> int: ...
    def content_hashes(self, project: str) -> dict[int, str]: ...
    def get_qnas(self, project: str, ids: list[int], deployment: str = LIVE) -> dict[int, QnA]: ...
    def list_qnas(self, project: str, deployment: str = LIVE, offset: int = 0, limit: int | None = None) -> list[QnA]: ...
    def count_qnas(self, project: str, deployment: str = LIVE) -> int: ...
    def get_synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]: ...
    def set_synonyms(self, project: str, groups: list[list[str]]) -> None: ...

    # deployments
    def deploy(self, project: str, deployment: str) -> Deployment: ...
    def list_deployments(self, project: str) -> list[Deployment]: ...
    def has_deployment(self, project: str, deployment: str) -> bool: ...

    # search
    def version(self, project: str, deployment: str = LIVE) -> int: ...
    def search_index(self, project: str, deployment: str = LIVE) -> MemIndex: ...

    # keys
    def add_key(self, key: ApiKey, key_hash: str) -> None: ...
    def find_key(self, key_hash: str) -> ApiKey | None: ...
    def list_keys(self) -> list[ApiKey]: ...
    def delete_key(self, key_id: str) -> bool: ...
    def close(self) -> None: ...
