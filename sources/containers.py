"""Which container (``sources.members.Container``) expands a file: ZIP archives and
e-mail messages, in one registry every source asks."""

from __future__ import annotations

from common.errors import Category, DocumentError
from common.settings import SourceSettings
from sources.archive import ZipContainer
from sources.mail import MailContainer
from sources.members import Container

CONTAINERS: tuple[Container, ...] = (ZipContainer(), MailContainer())


def container_for(name: str, settings: SourceSettings) -> Container | None:
    """The container that expands a file called ``name`` under ``settings``, if any."""
    for container in CONTAINERS:
        if container.enabled(settings) and container.claims(name):
            return container
    return None


def container_of(location: str) -> Container:
    """The container a listed member's ``location`` (the outermost container file) is."""
    name = location.replace("\\", "/").rsplit("/", 1)[-1]
    for container in CONTAINERS:
        if container.claims(name):
            return container
    raise DocumentError(Category.SOURCE_CHANGED, f"{location} is not a container of documents")
