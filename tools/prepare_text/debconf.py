"""Translated debconf templates (family debian): explanatory paragraphs of Debian packages, in sentences."""

from __future__ import annotations

import re
from pathlib import Path

from .cleaning import Row, stored_form
from .fetch import apt_fetch, run
from .labels import ENGLISH, provisional_label
from .licensing import dep5_license, dep5_licenses, gpl2_plus
from .prose import sentences

# Debian packages whose debconf templates carry translations and whose machine-readable copyright file puts
# debian/* (templates and po/) under GPL-2+; chosen once by measuring the packages that depend on debconf.
DEBCONF_PACKAGES = [
    "adjtimex",
    "aide-common",
    "analog",
    "apt-listchanges",
    "arno-iptables-firewall",
    "atftpd",
    "backuppc",
    "boinc-client",
    "ca-certificates",
    "calamaris",
    "cdebconf",
    "clamav-base",
    "clamav-daemon",
    "clamav-freshclam",
    "clamav-milter",
    "cpu",
    "cryptsetup",
    "cvsd",
    "cw",
    "cwcp",
    "cyrus-common",
    "davfs2",
    "dbconfig-common",
    "ddclient",
    "debian-edu-router-config",
    "debian-installer-launcher",
    "dictd",
    "dictionaries-common",
    "dist",
    "dwww",
    "etckeeper",
    "fdutils",
    "foomatic-filters",
    "fwlogwatch",
    "fwsnort",
    "ganeti-3.0",
    "gnubg",
    "gosa-desktop",
    "gpm",
    "greylistd",
    "hoteldruid",
    "icinga2-ido-mysql",
    "icinga2-ido-pgsql",
    "ifetch-tools",
    "ircd-hybrid",
    "isenkram-cli",
    "jackd1",
    "jove",
    "kwartz-client",
    "lava-server",
    "liblemonldap-ng-common-perl",
    "localepurge",
    "lxdm",
    "mailagent",
    "mailfilter",
    "mailman3",
    "mailman3-web",
    "man-db",
    "mdadm",
    "med-config",
    "moon-buggy",
    "motion",
    "mpdscribble",
    "mrtg",
    "msmtp",
    "mythtv-status",
    "nagvis",
    "nn",
    "nodm",
    "nsca",
    "nullmailer",
    "ocfs2-tools",
    "ocsinventory-agent",
    "open-iscsi",
    "pbuilder",
    "pconsole",
    "phalanx",
    "phpsysinfo",
    "pioneers-metaserver",
    "portsentry",
    "postgresql-common",
    "postsrsd",
    "printer-driver-pnm2ppa",
    "privoxy",
    "python3-mailman-hyperkitty",
    "radioclk",
    "resolvconf",
    "rkhunter",
    "rlinetd",
    "rpki-trust-anchors",
    "sddm",
    "slashem-common",
    "slbackup-php",
    "smb2www",
    "snoopy",
    "solid-pop3d",
    "sslh",
    "strongswan-starter",
    "sysstat",
    "sysvinit-core",
    "tiger",
    "tt-rss",
    "uif",
    "unattended-upgrades",
    "update-inetd",
    "wdm",
    "webalizer",
    "webfs",
    "wireshark-common",
    "x2goserver",
    "x2goserver-desktopsharing",
    "x2gothinclient-displaymanager",
    "xastir",
    "xawtv",
]


def debconf_paragraphs(templates: str) -> dict[tuple[str, str], list[str]]:
    """(template, locale or 'C') -> paragraphs of its description; verbatim (two-space) lines dropped."""
    out = {}
    for block in re.split(r"\n\s*\n", templates):
        name = re.search(r"^Template:\s*(\S+)", block, re.MULTILINE)
        for field in re.finditer(r"^Description(?:-([\w@]+)\.UTF-8)?:(.*(?:\n[ \t].*)*)", block, re.MULTILINE):
            lines = field.group(2).split("\n")
            paragraphs, current = [lines[0].strip()], []
            for line in lines[1:]:
                if line.strip() == ".":
                    paragraphs.append(" ".join(current))
                    current = []
                elif not line.startswith("  "):
                    current.append(line.strip())
            paragraphs.append(" ".join(current))
            if name:
                out[(name.group(1), field.group(1) or "C")] = [p for p in paragraphs if p]
    return out


def debconf_package(package: str, work: Path) -> tuple[list[Row], str, str]:
    """Rows of one package's templates (en from the untranslated field); returns (rows, version, copyright)."""
    root, version = apt_fetch(package, work)
    control = work / "control" / package
    if not control.exists():
        control.parent.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "-e", str(next((work / "deb").glob(f"{package}_*.deb"))), str(control)], work)
    rows = []
    templates = debconf_paragraphs((control / "templates").read_text("utf-8"))
    for (name, locale), paragraphs in sorted(templates.items()):
        label = ENGLISH if locale == "C" else provisional_label(locale, "gettext")
        for i, paragraph in enumerate(paragraphs if label else []):
            for j, sentence in enumerate(sentences(paragraph, label)):
                rows.append((label, f"{package}:{name}:{locale}:{i:02d}.{j:02d}", sentence))
    return rows, version, (root / f"usr/share/doc/{package}/copyright").read_text("utf-8")


def debconf(work: Path) -> dict:
    """Translated debconf templates of Debian packages: explanatory paragraphs, split into sentences."""
    rows, versions, licenses = [], {}, {}
    (work / "debconf-copyright").mkdir(exist_ok=True)
    for package in DEBCONF_PACKAGES:
        package_rows, versions[package], copyright_text = debconf_package(package, work)
        lic = dep5_license("debian/po/templates.pot", dep5_licenses(copyright_text))
        assert gpl2_plus(lic), f"{package}: debian/* is {lic!r}, not GPL-2+"
        (work / "debconf-copyright" / f"{package}.copyright").write_text(copyright_text)
        licenses[f"debconf/{package}.copyright"] = work / "debconf-copyright" / f"{package}.copyright"
        rows += package_rows
    return {
        "id": "debconf",
        "family": "debian",
        "rows": rows,
        "english": {stored_form(t) for label, _, t in rows if label == ENGLISH},
        "role": "train",
        "style": "prose",
        "package": "debian:" + ",".join(DEBCONF_PACKAGES),
        "version": ", ".join(f"{p}={v}" for p, v in versions.items()),
        "license": "GPL-2.0-or-later",
        "license_files": {"GPL-2": "/usr/share/common-licenses/GPL-2", **licenses},
        "license_file": "GPL-2",
        "attribution": "debconf templates of the listed Debian packages by their Debian maintainers and the "
        "Debian localization teams (po-debconf); each package's copyright file is in "
        "LICENSES/debconf/.",
    }
