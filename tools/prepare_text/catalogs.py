"""Gettext catalogs of Debian packages: the training sources vlc, kde and gnome, and the held-out gettext-ui
(GTK/GLib, Xfce, Pidgin, HexChat). One reader for all, so training and held-out UI text are cut alike."""

from __future__ import annotations

import re
from pathlib import Path

from .cleaning import Row, stored_form
from .fetch import apt_fetch
from .labels import ENGLISH, provisional_label
from .licensing import COMMON_LICENSE_TEXTS, dep5_license, dep5_licenses, package_copyright

# Training catalogs, by source id: (family, Debian packages). Only packages whose copyright file is machine-readable
# and gives the catalogs (po/) a free license; no package of the held-out families (GTK, GLib, Xfce, Pidgin,
# HexChat) is among them, and HELDOUT_DOMAINS keeps their catalogs out even when another package ships one.
CATALOG_SOURCES = {
    "vlc": ("videolan", ["vlc-l10n"]),
    "kde": ("kde", [
        "ark", "dolphin", "gwenview", "kate5-data", "kcalc", "kde-cli-tools-data", "kdeconnect", "khelpcenter",
        "kinfocenter", "kio", "kio-extras-data", "konsole", "ktexteditor-data", "kwin-data",
        "libkf5configwidgets-data", "libkf5textwidgets-data", "libkf5xmlgui-data", "okular",
        "plasma-desktop-data", "plasma-framework", "plasma-nm", "plasma-workspace-data", "systemsettings",
    ]),
    "gnome": ("gnome", [  # GNOME applications and MATE (whose catalogs descend from GNOME 2's): one family
        "baobab", "file-roller", "gnome-calculator", "gnome-control-center-data", "gnome-disk-utility",
        "gnome-software-common", "gnome-system-monitor", "gnome-terminal-data", "mutter-common",
        "atril-common", "caja-common", "engrampa-common", "eom-common", "marco-common", "mate-control-center-common",
        "mate-desktop-common", "mate-panel-common", "mate-power-manager-common", "mate-settings-daemon-common",
        "mate-terminal-common", "pluma-common",
    ]),
}
HELDOUT_DOMAINS = re.compile(r"^(gtk\d*|gtk\d+-properties|glib\d*|libxfce4ui|xfce4-settings|xfdesktop|ristretto|"
                             r"pidgin|hexchat)$")
FREE_LICENSE = re.compile(r"^(?:L?GPL|AGPL|MIT|X11|Expat|BSD|CC0|CC-BY|MPL|Apache|public-domain|"
                          r"LicenseRef-KDE-Accepted)", re.IGNORECASE)
# Translator credits (personal names and addresses), not text of the program.
CREDIT_MSGIDS = frozenset({"translator-credits", "translator_credits", "Your names", "Your emails",
                           "NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS", "translator-name"})
GETTEXT_MAX_CHARS = 120  # held-out interface strings
ORIGIN_KEY_CHARS = 40  # a catalog row's origin names its message by the first 40 characters of msgctxt|msgid


def mo_messages(path: Path) -> dict[str, str]:
    """msgctxt+msgid -> msgstr of a compiled catalog (plural entries and the header left out; .mo has no fuzzy).

    Read directly (GNU .mo layout) rather than with gettext.GNUTranslations, which refuses catalogs whose
    Plural-Forms header it cannot parse; every catalog we read is UTF-8."""
    import struct

    data = path.read_bytes()
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    count, originals, translations = struct.unpack(order + "3I", data[8:20])
    out = {}
    for i in range(count):
        length, offset = struct.unpack(order + "2I", data[originals + 8 * i : originals + 8 * i + 8])
        key = data[offset : offset + length]
        length, offset = struct.unpack(order + "2I", data[translations + 8 * i : translations + 8 * i + 8])
        value = data[offset : offset + length]
        if key and value and b"\x00" not in key:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _mnemonic_free(text: str) -> str:
    """GTK mnemonics: one underscore before a letter marks the access key (_Open -> Open)."""
    return re.sub(r"_(?=\w)", "", text, count=1) if text.count("_") == 1 else text


def po_license(locale: str, domain: str, stanzas: list) -> str:
    """The license a DEP-5 copyright file gives one catalog: the first of po/<locale>/<domain>.po (KDE's layout),
    po/<locale>.po (GNOME's) and po/ whose license differs from the whole tree's (`Files: *`), else the whole
    tree's."""
    for path in (f"po/{locale}/{domain}.po", f"po/{locale}.po", "po/x.po"):
        found = dep5_license(path, stanzas)
        if found and found != dep5_license("no-such-dir/x", stanzas):
            return found
    return dep5_license("po/x.po", stanzas) or dep5_license("x", stanzas)


def catalog_rows(package: str, work: Path, heldout: bool = False) -> tuple[list[Row], str, str, set[str]]:
    """Rows (translations and en msgids) of every .mo of one package: (rows, version, copyright, licenses used).

    A catalog whose license is not free (or not stated) is left out; in a training source, so are the catalogs of
    the held-out families."""
    root, version = apt_fetch(package, work)
    copyright_text = package_copyright(root, package)
    stanzas = dep5_licenses(copyright_text)
    assert copyright_text.startswith("Format:"), f"{package}: copyright file is not machine-readable"
    rows, licenses = [], set()
    for mo in sorted(root.glob("usr/share/locale/*/LC_MESSAGES/*.mo")):
        locale, domain = mo.parts[-3], mo.stem
        label = provisional_label(locale, "gettext")
        if not label or domain.endswith("-properties") or (not heldout and HELDOUT_DOMAINS.match(domain)):
            continue
        lic = po_license(locale, domain, stanzas)
        if not FREE_LICENSE.match(lic):
            continue
        licenses.add(lic)
        for key, value in mo_messages(mo).items():
            msgid = key.split("\x04")[-1]
            if msgid in CREDIT_MSGIDS or key.split("\x04")[0] in CREDIT_MSGIDS:
                continue
            msgkey = key.replace(chr(4), "|")[:ORIGIN_KEY_CHARS]
            origin = f"{package}/{locale}/{domain}.mo:{msgkey}"
            if stored_form(_mnemonic_free(value)) != stored_form(_mnemonic_free(msgid)):
                rows.append((label, origin, _mnemonic_free(value)))
            rows.append((ENGLISH, f"{package}/{domain}.mo:{msgkey}", _mnemonic_free(msgid)))
    return rows, version, copyright_text, licenses


def catalogs(source_id: str, packages: list[str], family: str, work: Path, heldout: bool = False) -> dict:
    """One source made of the gettext catalogs of several Debian packages; their copyright files go to
    LICENSES/<source>/."""
    rows, versions, licenses, used = [], {}, {}, {}
    folder = work / f"{source_id}-copyright"
    folder.mkdir(exist_ok=True)
    for package in packages:
        package_rows, versions[package], copyright_text, used[package] = catalog_rows(package, work, heldout)
        (folder / f"{package}.copyright").write_text(copyright_text)
        licenses[f"{source_id}/{package}.copyright"] = folder / f"{package}.copyright"
        rows += package_rows
    if heldout:
        rows = [r for r in rows if len(stored_form(r[2])) <= GETTEXT_MAX_CHARS]
    texts = sorted({lic for found in used.values() for lic in found})
    return {
        "id": source_id,
        "family": family,
        "rows": rows,
        "english": {stored_form(t) for label, _, t in rows if label == ENGLISH},
        "role": "heldout" if heldout else "train",
        "style": "ui",
        "package": "debian:" + ",".join(packages),
        "version": ", ".join(f"{p}={v}" for p, v in versions.items()),
        "license": " AND ".join(f"({t})" if " " in t else t for t in texts),
        "catalog_licenses": {p: sorted(found) for p, found in used.items()},
        "license_files": {**COMMON_LICENSE_TEXTS, **licenses},
        "license_file": f"{source_id}/{packages[0]}.copyright",
        "attribution": f"Translations of the listed Debian packages' programs by their translation teams; each "
        f"package's copyright file (which states who and under which license) is in LICENSES/{source_id}/.",
    }


def vlc(work: Path) -> dict:
    """VLC's interface strings (vlc-l10n)."""
    family, packages = CATALOG_SOURCES["vlc"]
    return catalogs("vlc", packages, family, work)


def kde(work: Path) -> dict:
    """KDE Plasma, Frameworks and application catalogs."""
    family, packages = CATALOG_SOURCES["kde"]
    return catalogs("kde", packages, family, work)


def gnome(work: Path) -> dict:
    """GNOME application and MATE desktop catalogs."""
    family, packages = CATALOG_SOURCES["gnome"]
    return catalogs("gnome", packages, family, work)


# The held-out desktop catalogs: two desktop families and two chat clients, none Mozilla, Wikimedia, Debian, KDE,
# VideoLAN or a GNOME application. package -> (family, the license of its translations as its DEP-5 po/ stanza
# states it; for GTK 4 and GLib that stanza lists every license of the tree and we take the library's own).
GETTEXT_PACKAGES = {
    "libgtk-3-common": ("GTK", "LGPL-2+"),
    "libgtk-4-common": ("GTK", "LGPL-2.1+"),
    "libglib2.0-data": ("GLib", "LGPL-2.1+"),
    "libxfce4ui-common": ("Xfce", "LGPL-2+"),
    "xfce4-settings": ("Xfce", "GPL-2+"),
    "xfdesktop4-data": ("Xfce", "GPL-2+"),
    "ristretto": ("Xfce", "GPL-2+"),
    "pidgin-data": ("Pidgin", "GPL-2+"),
    "hexchat-common": ("HexChat", "GPL-2+"),
}


def gettext_ui(work: Path) -> dict:
    """Held-out UI strings: gettext catalogs of GTK/GLib, Xfce, Pidgin and HexChat (LGPL/GPL), 15-120 characters."""
    for package, (_, declared) in GETTEXT_PACKAGES.items():
        root, _ = apt_fetch(package, work)
        stated = dep5_license("po/de.po", dep5_licenses(package_copyright(root, package)))
        assert declared in stated.split(), f"{package}: po/ is {stated!r} in its copyright file"
    source = catalogs("gettext-ui", list(GETTEXT_PACKAGES), "gtk-xfce-pidgin-hexchat", work, heldout=True)
    source["catalog_licenses"] = {p: [lic] for p, (_, lic) in GETTEXT_PACKAGES.items()}
    source["license"] = "LGPL-2.0-or-later AND LGPL-2.1-or-later AND GPL-2.0-or-later"
    source["attribution"] = ("Translations of GTK, GLib, Xfce, Pidgin and HexChat by their translation teams; Debian "
                             "packages as listed, each package's copyright file in LICENSES/gettext-ui/.")
    return source
