"""A StationXML file cut to the stations a task checks, so that obspy parses only those.

obspy builds an object for every network, station, channel and response stage of a StationXML
file: 1.4–2 s and 110–120 MiB for 1,112 stations of three channels with their poles and zeros,
far more for a real network's full responses, on every worker whose tasks check traces against
it. A partition of an archive holds a few stations. `Pieces.subset(codes)` is the document that
obspy's queries of those station codes see as they see the whole file: the file's header, then
every network in document order, each with its stations of those codes alone (a network
holding none of them left out; a network without any station kept, as `Inventory.select`
keeps it). Every query of an ingest is by station code (`Inventory.select(station=code)` and
narrower: `inventory_index`, `inventory_text`, `response`), so its answer from the subset's
inventory is the whole file's. `Pieces.of` parses the file with lxml as a stream (a tenth of
obspy's time) and keeps each station's XML (about the file's size in memory), not the tree.

Only FDSN StationXML is cut (`Pieces.of` is None for anything else: obspy reads it whole).
A defect of a station no task asks for is not seen by obspy; the XML itself must be well
formed.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from lxml import etree

ROOT = "FDSNStationXML"
NETWORK, STATION = "Network", "Station"
# fnmatch's wildcards: a code holding one selects by pattern, which cutting cannot follow.
WILDCARDS = frozenset("*?[")


def _local(element: etree._Element) -> str:
    """The element's tag without its namespace ("" for comments and processing instructions)."""
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _xml(element: etree._Element) -> bytes:
    return etree.tostring(element, with_tail=False)


@dataclass(frozen=True)
class NetworkPiece:
    """A network: its XML without stations, and (station code upper-case, XML) per station."""

    shell: bytes
    stations: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Pieces:
    """A StationXML document in pieces: its root element without children, and each child in
    order (a network's as a `NetworkPiece`, any other's XML)."""

    root: bytes
    children: tuple[NetworkPiece | bytes, ...]

    @classmethod
    def of(cls, content: bytes) -> Pieces | None:
        """The pieces of an FDSN StationXML document, or None (not well-formed XML, or another
        format). Parsed as a stream: each station is serialised and dropped as it ends, so the
        parse holds one station's tree, not the document's."""
        root: etree._Element | None = None
        children: list[NetworkPiece | bytes] = []
        stations: list[tuple[str, bytes]] = []
        try:
            for event, element in etree.iterparse(
                io.BytesIO(content), events=("start", "end"), huge_tree=True
            ):
                if root is None:
                    root = element
                    if _local(root) != ROOT:
                        return None
                    continue
                parent = element.getparent()
                if event == "start" or parent is None:
                    continue
                if parent is root:
                    if _local(element) == NETWORK:  # its stations went as each ended
                        children.append(NetworkPiece(_xml(element), tuple(stations)))
                        stations = []
                    else:
                        children.append(_xml(element))
                    root.remove(element)
                elif parent.getparent() is root and _local(parent) == NETWORK:
                    if _local(element) == STATION:
                        stations.append((str(element.get("code", "")).upper(), _xml(element)))
                        parent.remove(element)
        except etree.XMLSyntaxError:
            return None
        if root is None:
            return None
        for child in list(root):  # comments: no data
            root.remove(child)
        return cls(_xml(root), tuple(children))

    def codes(self) -> frozenset[str]:
        """The station codes (upper-case) of the document's networks."""
        return frozenset(
            code for child in self.children if isinstance(child, NetworkPiece)
            for code, _ in child.stations
        )  # fmt: skip

    def subset(self, codes: Iterable[str]) -> bytes:
        """The document of the stations coded `codes` (module doc), UTF-8 XML."""
        wanted = {code.upper() for code in codes}
        root = etree.fromstring(self.root)
        for child in self.children:
            if not isinstance(child, NetworkPiece):
                root.append(etree.fromstring(child))
                continue
            kept = [xml for code, xml in child.stations if code in wanted]
            if child.stations and not kept:
                continue
            network = etree.fromstring(child.shell)
            for xml in kept:
                network.append(etree.fromstring(xml))
            root.append(network)
        return etree.tostring(root, xml_declaration=True, encoding="UTF-8")
