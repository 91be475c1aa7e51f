"""Sources for scripts/buildroot-offline (see there): fills the primary site,
writes local.mk's overrides and the manifest. Run by that script; with
`fixup DL_DIR DIR`, only the fixup of Debian's repacked sources on an unpacked
source DIR (ci/check-buildroot)."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request

BUILDROOT = os.environ.get("BUILDROOT", "")
OFFLINE = os.environ.get("OFFLINE", "")
OUT = os.environ.get("O", "")
MIRROR = os.environ.get("DEBIAN_MIRROR", "")
SITE = os.path.join(OFFLINE, "site")
SRC = os.path.join(OFFLINE, "src")
LOCAL = os.environ.get("LOCAL_SOURCES", "").split()
OVERRIDES = dict(p.split("=", 1) for p in os.environ.get("SRC_OVERRIDES", "").split())
PINNED = dict(p.split("=", 1) for p in os.environ.get("DEBIAN_VERSIONS", "").split())
GIT_MIRRORS = os.environ.get("GIT_MIRRORS", "")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Buildroot's download directory name -> Debian's source package, where
# they differ.
DEBIAN_NAMES = {
    "libzlib": "zlib", "jpeg-turbo": "libjpeg-turbo", "libglib2": "glib2.0",
    "libopenssl": "openssl", "squashfs": "squashfs-tools", "uboot": "u-boot",
    "uboot-tools": "u-boot", "libconfuse": "libconfuse", "libyaml": "libyaml",
    "python-flit-core": "flit", "python-setuptools": "setuptools",
    "python-wheel": "wheel", "python-packaging": "python-packaging",
    "python-installer": "python-installer", "python-pypa-build": "python-build",
    "python-pyproject-hooks": "pyproject-hooks", "pcre2": "pcre2",
    "libtasn1": "libtasn1-6", "gmp": "gmp",
    "mpc": "mpclib3", "mpfr": "mpfr4", "autoconf-archive": "autoconf-archive",
    "zstd": "libzstd", "xz": "xz-utils", "gcc": "gcc-14", "ninja": "ninja-build",
    "libnl": "libnl3", "wpa_supplicant": "wpa",
}


def debian_name(dl_dir, version):
    if dl_dir == "python3":
        return "python" + ".".join(version.split(".")[:2])
    if dl_dir == "gcc":
        return "gcc-" + version.split(".")[0]
    return DEBIAN_NAMES.get(dl_dir, dl_dir)


def upstream_of(dver):
    """Debian's version without epoch, revision and repacking suffixes."""
    v = re.sub(r"^\d+:", "", dver).rsplit("-", 1)[0]
    if "really" in v:
        v = v.split("really", 1)[1]
    return re.split(r"[+~]", v)[0]


def series(v):
    return ".".join(re.split(r"[.-]", v)[:2])


def vkey(v):
    return [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", v)]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def expected_hash(pkg, source):
    for hf in pkg.get("hashes") or []:
        path = os.path.join(BUILDROOT, hf) if not os.path.isabs(hf) else hf
        if not os.path.exists(path):
            continue
        for line in open(path):
            f = line.split()
            if len(f) == 3 and f[0] == "sha256" and f[2] == source:
                return f[1]
    return None


def debian_index():
    """sha256 -> (directory, file); (package) -> [(version, directory, files)]."""
    by_hash, by_pkg = {}, {}
    text = open(os.path.join(OFFLINE, "apt", "Sources"), encoding="utf-8", errors="replace").read()
    for stanza in text.split("\n\n"):
        fields, key = {}, None
        for line in stanza.split("\n"):
            if line.startswith(" ") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" not in fields:
            continue
        files = [x.split() for x in fields.get("Checksums-Sha256", "").split("\n") if x.strip()]
        for h, _size, name in files:
            by_hash.setdefault(h, []).append((fields["Directory"], name))
        by_pkg.setdefault(fields["Package"], []).append((fields["Version"], fields["Directory"], files))
    return by_hash, by_pkg


def fetch(url, dest):
    print("fetching", url, flush=True)
    tmp = dest + ".part"
    with urllib.request.urlopen(url, timeout=120) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f)
    os.rename(tmp, dest)


def var(name):
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def overridden(users):
    """The packages to name in local.mk: the headers built from the kernel
    take the kernel's override."""
    return [u for u in users if not (u == "linux-headers" and "linux" in users)]


def unpack_with_patches(tarball, dest, patches, lenient=False):
    if os.path.exists(os.path.join(dest, ".offline-done")):
        return
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    with tarfile.open(tarball) as t:
        t.extractall(dest + ".tmp")
    tops = os.listdir(dest + ".tmp")
    top = os.path.join(dest + ".tmp", tops[0]) if len(tops) == 1 else dest + ".tmp"
    os.rmdir(dest)
    os.rename(top, dest)
    shutil.rmtree(dest + ".tmp", ignore_errors=True)
    # Debian's gcc carries the upstream tarball inside its own.
    nested = [f for f in os.listdir(dest) if re.match(r".*\.tar\.(xz|gz|bz2)$", f)]
    if nested and not os.path.exists(os.path.join(dest, "configure")):
        inner = max(nested, key=lambda f: os.path.getsize(os.path.join(dest, f)))
        outer = dest + ".outer"
        os.rename(dest, outer)
        unpack_with_patches(os.path.join(outer, inner), dest, patches)
        shutil.rmtree(outer)
        return
    # Debian's tarball of a repository whose project is a subdirectory of
    # it (expat/): that subdirectory, as upstream's release has it.
    inner = os.path.join(dest, os.path.basename(dest).rsplit("-", 1)[0])
    if not os.path.exists(os.path.join(dest, "configure.ac")) and os.path.exists(
            os.path.join(inner, "configure.ac")):
        os.rename(inner, dest + ".inner")
        shutil.rmtree(dest)
        os.rename(dest + ".inner", dest)
    apply_patches(dest, patches, lenient)
    open(os.path.join(dest, ".offline-done"), "w").close()


def generate_configure(dest):
    """Debian's tarball of a project released from its git tag (libxcrypt)
    has no configure: made as the project's autogen.sh makes it."""
    if os.path.exists(os.path.join(dest, "configure")) or not os.path.exists(
            os.path.join(dest, "configure.ac")):
        return
    cmd = ["sh", "autogen.sh"] if os.path.exists(os.path.join(dest, "autogen.sh")) else ["autoreconf", "-fi"]
    subprocess.run(cmd, cwd=dest, check=True, stdout=subprocess.DEVNULL)
    copy_outside_links(dest)


def empty_manual(name):
    """What stands for a manual Debian's repacking took out."""
    return "@setfilename " + os.path.basename(name)[:-len(".texi")] + ".info\n"


def debian_repack_fixup(dl_dir, dest):
    """What Debian's own builds do for the GFDL manuals its repacking takes
    out of GNU packages: bison's and gawk's .texi (an empty manual in their
    place, no makeinfo run: debian/rules of bison), gmp's doc/, glibc's
    manual/, gcc's target hooks manual. Safe to run again."""
    # glibc without manual/: not among the directories it builds.
    makeconfig = os.path.join(dest, "Makeconfig")
    if dl_dir == "glibc" and not os.path.exists(os.path.join(dest, "manual")):
        text = open(makeconfig).read()
        with open(makeconfig, "w") as f:
            f.write(re.sub(r"^(\t.*\bwctype) manual\b", r"\1", text, flags=re.M))
    for top, _dirs, files in os.walk(dest):
        # A whole doc/ directory gone (gmp): an empty one in its place.
        if "Makefile.am" in files:
            text = open(os.path.join(top, "Makefile.am"), errors="replace").read()
            m = re.search(r"^SUBDIRS\s*=((?:.*\\\n)*.*)$", text, re.M)
            for d in (m.group(1).replace("\\\n", " ").split() if m else []):
                sub = os.path.join(top, d)
                if "$" in d or "@" in d or os.path.exists(sub):
                    continue
                os.makedirs(sub)
                open(os.path.join(sub, "Makefile.am"), "w").close()
                with open(os.path.join(sub, "Makefile.in"), "w") as f:
                    f.write("all install install-strip uninstall clean distclean mostlyclean check "
                            "installcheck info install-info install-data install-exec distdir:\n"
                            ".PHONY: all install install-strip uninstall clean distclean mostlyclean "
                            "check installcheck info install-info install-data install-exec distdir\n")
        if "Makefile.in" not in files:
            continue
        mk = os.path.join(top, "Makefile.in")
        text = original = open(mk, errors="replace").read()
        # gcc's target hooks manual is a stub: not compared with the one
        # made from the hooks (Debian's gcc-gfdl-build.diff).
        stub = os.path.join(top, "doc", "tm.texi.in")
        if os.path.exists(stub) and os.path.getsize(stub) < 512:
            text = re.sub(r"^s-tm-texi: build/genhooks.*\n(\t.*\n)+", "s-tm-texi:\n\t$(STAMP) $@\n",
                          text, flags=re.M)
        m = re.search(r"^info_TEXINFOS\s*=((?:.*\\\n)*.*)$", text, re.M)
        names = m.group(1).replace("\\\n", " ").split() if m else []
        # The manuals taken out, and those an earlier run emptied.
        missing = [n for n in names if "$" not in n and (not os.path.exists(os.path.join(top, n)) or open(
            os.path.join(top, n), errors="replace").read() == empty_manual(n))]
        for n in missing:
            with open(os.path.join(top, n), "w") as f:
                f.write(empty_manual(n))
            # Older than what was made from the real one (gawk's examples).
            os.utime(os.path.join(top, n), (946684800, 946684800))
        # An empty manual is never given to makeinfo, which a build machine
        # need not have (gawk's and bison's alike).
        if missing:
            text = re.sub(r"^MAKEINFO = @MAKEINFO@.*$", "MAKEINFO = true", text, flags=re.M)
            if dl_dir == "bison":
                # Its examples come from the manual: not asked for again
                # (debian/patches/01_keep_stamp_files).
                text = text.replace("\t@test -f $@ || rm -f examples/extracted.stamp\n", "")
        # The manual's figures went with it (bison's doc/figs): the empty
        # manual needs none.
        figs = re.search(r"^FIGS_GV\s*=\s*\\?\n?\s*(\S+)", text, re.M)
        if figs and not os.path.exists(os.path.join(top, figs.group(1))):
            text = re.sub(r"^\S+\.(info|dvi|pdf|html): \$\(FIGS_GV:[^\n]*\n", "", text, flags=re.M)
        # Every edit above is written, whichever of them applied (gawk's
        # empty manuals have no figures).
        if text != original:
            with open(mk, "w") as f:
                f.write(text)


def apply_patches(dest, patches, lenient=False):
    """Applies Buildroot's patches; `lenient` (a stand-in of another
    version): a patch that does not apply is left out, named in
    .offline-skipped-patches."""
    skipped = []
    for p in patches:
        p = os.path.join(BUILDROOT, p) if not os.path.isabs(p) else p
        if not (p.endswith(".patch") or p.endswith(".diff")):
            continue
        # A patch the newer source already carries is skipped: it does not
        # apply, and it reverses. (Reversing alone proves nothing: a patch
        # that only deletes lines reverses onto any source with its context.)
        def dry_run(patch, *args):
            with open(patch, "rb") as f:
                return subprocess.run(["patch", "-p1", "--dry-run", "-s", "-f", *args, "-d", dest], stdin=f,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if not dry_run(p, "-N") and dry_run(p, "-R"):
            continue
        if lenient and not dry_run(p, "-N"):
            skipped.append(os.path.basename(p))
            continue
        with open(p, "rb") as f:
            subprocess.run(["patch", "-p1", "-N", "-s", "-d", dest], stdin=f, check=True)
    if skipped:
        with open(os.path.join(dest, ".offline-skipped-patches"), "w") as f:
            f.write(" ".join(skipped))


def rust_shim(sources):
    """An install.sh that puts wrappers of the system's rustc and cargo in
    HOST_DIR/bin; the target's std comes with the system's sysroot, linked
    into HOST_DIR/lib/rustlib and named as rustc's sysroot: Buildroot's
    compiler wrapper refuses the linker paths under /usr that the system's
    own sysroot would give."""
    dest = os.path.join(SRC, "rust-bin")
    script = (
        "#!/bin/sh\nset -eu\nfor a in \"$@\"; do case $a in --prefix=*) p=${a#--prefix=} ;; esac; done\n"
        "mkdir -p \"$p/bin\" \"$p/lib/rustlib\"\n"
        f"for d in \"$({os.environ['RUSTC']} --print sysroot)\"/lib/rustlib/*; do\n"
        "    ln -sfn \"$d\" \"$p/lib/rustlib/\"\ndone\n"
        f"printf '#!/bin/sh\\nexec {os.environ['RUSTC']} --sysroot %s \"$@\"\\n' \"$p\" >\"$p/bin/rustc\"\n"
        f"printf '#!/bin/sh\\nexec {os.environ['CARGO']} \"$@\"\\n' >\"$p/bin/cargo\"\n"
        "chmod 755 \"$p/bin/rustc\" \"$p/bin/cargo\"\n")
    std = [os.path.join(dest, "std", s.split(".tar")[0]) for s in sources if s.startswith("rust-std-")]
    for d in [dest] + std:
        os.makedirs(d, exist_ok=True)
        path, text = os.path.join(d, "install.sh"), script if d == dest else "#!/bin/sh\n"
        # Rewritten only when changed: another board's build may be reading it.
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
        os.chmod(path, 0o755)
    return dest


def patches_of(pkg):
    """Buildroot's patches for a package: show-info's list, and gcc's, which
    its own extract hook applies from package/gcc/VERSION."""
    patches = list(pkg.get("patches") or [])
    if pkg.get("dl_dir") == "gcc":
        d = os.path.join(BUILDROOT, "package", "gcc", pkg["version"])
        patches += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".patch"))
    return patches


def read_list():
    """scripts/buildroot-offline.sources: package -> (how, from, what, steps)."""
    given = {}
    for line in open(os.path.join(ROOT, "scripts", "buildroot-offline.sources")):
        f = line.split("#", 1)[0].split()
        if f:
            given[f[0]] = (f[1], f[2], f[3] if len(f) > 3 else "", f[4:])
    return given


def git_dir(repo):
    """The git directory of OWNER/NAME under GIT_MIRRORS, or None."""
    base = os.path.join(GIT_MIRRORS, repo.replace("/", "+"))
    for d in (os.path.join(base, "repo", ".git"), os.path.join(base, "repo"), os.path.join(base, ".git"), base,
              os.path.join(GIT_MIRRORS, repo + ".git")):
        if os.path.exists(os.path.join(d, "HEAD")) and os.path.isdir(os.path.join(d, "objects")):
            return d
    return None


def git_archive(repo, tag, prefix=None):
    """`git archive` of the tag as a tar stream (bytes)."""
    d = git_dir(repo)
    cmd = ["git", "--git-dir", d, "archive", "--format=tar"] + (["--prefix=" + prefix] if prefix else []) + [tag]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def debian_candidates(by_pkg, source_pkg, series_prefix):
    """Debian's versions of a source package in a series (WHAT in the list:
    6.12 takes 6.12.N, 2024 takes 20241016), newest first."""
    def in_series(v):
        return v == series_prefix or v.startswith(series_prefix + ".") or (
            series_prefix.isdigit() and len(series_prefix) == 4 and v.startswith(series_prefix))
    cands = [c for c in by_pkg.get(source_pkg, []) if in_series(upstream_of(c[0]))]
    return sorted(cands, key=lambda c: vkey(upstream_of(c[0])), reverse=True)


def debian_binaries():
    """Debian's arm64 binary packages of non-free-firmware: name ->
    [(version, filename, sha256)]."""
    pkgs = {}
    path = os.path.join(OFFLINE, "apt", "Packages")
    text = open(path, encoding="utf-8", errors="replace").read() if os.path.exists(path) else ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.split("\n") if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Filename" in fields:
            pkgs.setdefault(fields["Package"], []).append((fields["Version"], fields["Filename"], fields["SHA256"]))
    return pkgs


def debian_deb(name, series_prefix, label):
    """The newest binary package NAME of the series the archive serves:
    (path, version, filename), or None."""
    cands = [c for c in debian_binaries().get(name, []) if upstream_of(c[0]).startswith(series_prefix)]
    for dver, filename, sha in sorted(set(cands), key=lambda c: vkey(upstream_of(c[0])), reverse=True):
        deb = os.path.join(OFFLINE, "debian", os.path.basename(filename))
        if not os.path.exists(deb):
            try:
                fetch(f"{MIRROR}/{filename}", deb)
            except OSError as e:
                print(f"{label}: {MIRROR}/{filename}: {e}")
                continue
        if sha256(deb) != sha:
            os.unlink(deb)
            continue
        return deb, dver, filename
    # Else what this machine's own apt serves of it (main: wireless-regdb).
    work = os.path.join(OFFLINE, "debian")
    got = subprocess.run(["apt-get", "download", "--print-uris", "-q", name], capture_output=True, text=True)
    m = re.search(r"'(\S+)' (\S+) \d+ SHA256:(\w+)", got.stdout)
    if m and upstream_of(m.group(2).split("_")[1]).startswith(series_prefix):
        deb = os.path.join(work, m.group(2))
        subprocess.run(["apt-get", "download", "-q", name], cwd=work, check=True, capture_output=True)
        if os.path.exists(deb) and sha256(deb) == m.group(3):
            return deb, m.group(2).split("_")[1], m.group(1).split("/debian/", 1)[-1]
    return None


def debian_orig(cands, label):
    """The first candidate's original tarball the archive serves: (path,
    Debian version, directory, name), or None."""
    for dver, directory, files in cands:
        origs = [f for f in files if ".orig.tar." in f[2] and not f[2].endswith(".asc") and ".orig-" not in f[2]]
        if not origs:
            continue
        name = origs[0][2]
        tarball = os.path.join(OFFLINE, "debian", name)
        os.makedirs(os.path.dirname(tarball), exist_ok=True)
        if not os.path.exists(tarball):
            try:
                fetch(f"{MIRROR}/{directory}/{name}", tarball)
            except OSError as e:
                print(f"{label}: {MIRROR}/{directory}/{name}: {e}")
                continue
        return tarball, dver, directory, name
    return None


def system_shim(package):
    """A source tree whose configure and make install put wrappers of the
    host's own programs of a Debian package in HOST_DIR/bin."""
    dest = os.path.join(SRC, "system-" + package)
    os.makedirs(dest, exist_ok=True)
    progs = [line.strip() for line in subprocess.run(["dpkg", "-L", package], capture_output=True, text=True,
                                                      check=True).stdout.split("\n")
             if re.match(r"^/usr/bin/[^/]+$", line.strip())]
    makefile = "include config.mk\nall:\ninstall:\n\tmkdir -p $(DESTDIR)$(prefix)/bin\n"
    # Debian installs upstream's fakeroot and faked as NAME-sysv (NAME
    # itself is an alternative): upstream's names too.
    names = [(p, os.path.basename(p)) for p in progs]
    names += [(p, n[:-len("-sysv")]) for p, n in names if n.endswith("-sysv")]
    for prog, name in names:
        makefile += (f"\tprintf '#!/bin/sh\\nexec {prog} \"$$@\"\\n' >$(DESTDIR)$(prefix)/bin/{name}\n"
                     f"\tchmod 755 $(DESTDIR)$(prefix)/bin/{name}\n")
    configure = ("#!/bin/sh\n# Writes the prefix for make install; no build.\nfor a in \"$@\"; do case $a in "
                 "--prefix=*) echo \"prefix = ${a#--prefix=}\" >config.mk ;; esac; done\n")
    # Rewritten only when changed: a build may be reading it.
    for name, text in (("configure", configure), ("Makefile", makefile)):
        path = os.path.join(dest, name)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
    os.chmod(os.path.join(dest, "configure"), 0o755)
    return dest, progs


def run_steps(dest, steps, by_pkg):
    def sh(*cmd):
        subprocess.run(cmd, cwd=dest, check=True, stdout=subprocess.DEVNULL)
    for step in steps:
        if step == "autogen":
            sh("sh", "autogen.sh")
        elif step == "bootstrap":
            sh("sh", "bootstrap.sh")
        elif step == "gtkdocize":
            sh("gtkdocize", "--copy", "--docdir", "libkmod/docs")
        elif step.startswith("gettext-extra="):
            # What HOST_GETTEXT_TINY_COPY_EXTRA_FILES copies from GNU
            # gettext's tarball (an override runs no post-patch hook), from
            # Debian's gettext of the series named (0.23 moved them).
            got = debian_orig(debian_candidates(by_pkg, "gettext", step.split("=", 1)[1]), "gettext")
            if not got:
                raise OSError("no Debian gettext source")
            work = dest + ".gettext"
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            subprocess.run(["tar", "-xf", got[0], "-C", work, "--strip-components=1"], check=True)
            mk = open(os.path.join(BUILDROOT, "package", "gettext-tiny", "gettext-tiny.mk")).read()
            files = re.search(r"GETTEXT_TINY_EXTRA_GETTEXT_FILES = \\\n((?:\t.*\n)+)", mk).group(1)
            os.makedirs(os.path.join(dest, "extra"), exist_ok=True)
            for f in files.replace("\\", " ").split():
                shutil.copy(os.path.join(work, f), os.path.join(dest, "extra", os.path.basename(f)))
            os.makedirs(os.path.join(dest, "build-aux"), exist_ok=True)
            shutil.copy(os.path.join(work, "build-aux", "config.rpath"), os.path.join(dest, "build-aux"))
            shutil.rmtree(work)
        elif step not in ("no-patches", "python-major"):
            raise ValueError("unknown step " + step)
    copy_outside_links(dest)


def given_source(entry, pkg, dl_dir, version, source, site_file, want, by_pkg, local_mk):
    """A download the list names: (origin, check)."""
    how, frm, what, steps = entry
    if how == "archive":
        if not git_dir(frm):
            return f"missing: git directory of {frm} (GIT_MIRRORS)", "missing", None
        if not (os.path.exists(site_file) and sha256(site_file) == want):
            # GitHub's prefix: the repository's name and the tag less a
            # leading v.
            prefix = frm.split("/")[1] + "-" + re.sub(r"^v(?=\d)", "", what) + "/"
            data = git_archive(frm, what, prefix)
            gz = subprocess.run(["gzip", "-n"], input=data, capture_output=True, check=True).stdout
            with open(site_file + ".part", "wb") as f:
                f.write(gz)
            if hashlib.sha256(gz).hexdigest() != want:
                os.unlink(site_file + ".part")
                return f"missing: git archive of {frm} {what} is not Buildroot's {source}", "missing", None
            os.rename(site_file + ".part", site_file)
        return f"git archive of {frm} {what}", "hash", None
    dest = os.path.join(SRC, f"{dl_dir}-{version}")
    mark = os.path.join(dest, ".offline-given")
    stamp = " ".join([how, frm, what] + steps)
    if how == "tree":
        if not git_dir(frm):
            return f"missing: git directory of {frm} (GIT_MIRRORS)", "missing", None
        if not (os.path.exists(mark) and open(mark).read() == stamp):
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            subprocess.run(["tar", "-x", "-C", dest], input=git_archive(frm, what), check=True)
            run_steps(dest, steps, by_pkg)
            apply_patches(dest, [] if "no-patches" in steps else patches_of(pkg))
            with open(mark, "w") as f:
                f.write(stamp)
        origin = f"git archive of {frm} {what}" + (", then " + ", ".join(steps) if steps else "")
        check = "overridden: given as a source tree (the release tarball is generated)"
    elif how == "debian":
        cands = debian_candidates(by_pkg, frm, what)
        got = None
        if not (os.path.exists(mark) and open(mark).read().startswith(stamp + "\n")):
            got = debian_orig(cands, source)
            if not got:
                return f"missing: Debian's {frm} {what}.x", "missing", None
            shutil.rmtree(dest, ignore_errors=True)
            unpack_with_patches(got[0], dest, [] if "no-patches" in steps else patches_of(pkg),
                                lenient=upstream_of(got[1]) != re.sub(r"^v", "", version))
            debian_repack_fixup(dl_dir, dest)
            generate_configure(dest)
            with open(mark, "w") as f:
                f.write(stamp + "\n" + f"Debian {got[2]}/{got[3]} (Debian {got[1]})")
        origin = open(mark).read().split("\n", 1)[1]
        upstream = upstream_of(origin.rsplit("(Debian ", 1)[1].rstrip(")"))
        skipped_file = os.path.join(dest, ".offline-skipped-patches")
        skipped = open(skipped_file).read() if os.path.exists(skipped_file) else ""
        origin += ", no patches (Buildroot's are for " + version + ")" if "no-patches" in steps else \
            ", Buildroot's patches applied" + (f" but {skipped} (for {version})" if skipped else "")
        check = f"overridden: stand-in {upstream} (series {what})" if upstream != re.sub(r"^v", "", version) \
            else "overridden: same version, other bytes"
        if "python-major" in steps:
            # Buildroot names the host Python's paths by its own version.
            local_mk.append("override PYTHON3_VERSION_MAJOR = " + ".".join(upstream.split(".")[:2]))
    elif how == "deb":
        if not (os.path.exists(mark) and open(mark).read().startswith(stamp + "\n")):
            got = debian_deb(frm, what, source)
            if not got:
                return f"missing: Debian's binary package {frm} {what}", "missing", None
            shutil.rmtree(dest, ignore_errors=True)
            subprocess.run(["dpkg-deb", "-x", got[0], dest + ".deb"], check=True)
            for step in steps:
                # layout=DIR: the package's DIR as the source's boot/ (the
                # Raspberry Pi firmware repository's layout).
                if step.startswith("boot="):
                    os.makedirs(dest, exist_ok=True)
                    os.rename(os.path.join(dest + ".deb", step.split("=", 1)[1]), os.path.join(dest, "boot"))
                # file=FROM:TO: the package's FROM as the source's TO.
                elif step.startswith("file="):
                    frm_file, to_file = step.split("=", 1)[1].split(":")
                    os.makedirs(dest, exist_ok=True)
                    shutil.copy(os.path.join(dest + ".deb", frm_file), os.path.join(dest, to_file))
            if not os.path.exists(dest):
                os.rename(dest + ".deb", dest)
            shutil.rmtree(dest + ".deb", ignore_errors=True)
            with open(mark, "w") as f:
                f.write(stamp + "\n" + f"Debian {got[2]} ({got[1]})")
        origin = open(mark).read().split("\n", 1)[1]
        check = "overridden: stand-in (Debian's binary package)"
    elif how == "system":
        dest, progs = system_shim(frm)
        installed = subprocess.run(["dpkg-query", "-W", "-f=${Version}", frm], capture_output=True,
                                   text=True).stdout
        origin = f"system {frm} {installed} (Debian's package: {', '.join(progs)})"
        check = "overridden: the host's program"
    else:
        raise ValueError("unknown kind " + how)
    return origin, check, dest



def copy_outside_links(tree):
    """Links in a source tree to files outside it (libtoolize without
    --copy links ltmain.sh to this machine's libtool) become copies, as a
    release tarball has them: the build patches them in its own tree."""
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            path = os.path.join(dirpath, name)
            target = os.path.realpath(path)
            if os.path.islink(path) and os.path.isfile(target) and \
                    os.path.commonpath([target, os.path.realpath(tree)]) != os.path.realpath(tree):
                os.unlink(path)
                shutil.copy2(target, path)


def libtool_patches(info, local_mk):
    """Buildroot patches each autotools package's libtool (ltmain.sh) after
    the package's own patches, so that relinking at install time looks in
    the staging directory, not the build machine's /usr/lib; a source given
    as an override skips that step (libnl 3.11's install stopped on
    "unsafe ... path used in cross-compilation: '-L/usr/lib'"). Its hook
    runs after the override's copy instead, except where the package's .mk
    says LIBTOOL_PATCH = NO or the package autoreconfs (Buildroot patches
    it after that, before configure, overrides too)."""
    names = {var(n): (n, pkg) for n, pkg in info.items()}
    lines = []
    for line in local_mk:
        m = re.match(r"^(\w+)_OVERRIDE_SRCDIR = ", line)
        if not m or m[1] not in names:
            continue
        name, pkg = names[m[1]]
        d = pkg.get("package_dir") or ""
        d = d if os.path.isabs(d) else os.path.join(BUILDROOT, d)
        text = "".join(open(os.path.join(d, f)).read() for f in sorted(os.listdir(d)) if f.endswith(".mk"))
        # A package that autoreconfs has the hook after that, before configure;
        # a host package inherits both settings from its target one.
        own = {m[1], m[1].removeprefix("HOST_")}
        if ("autotools-package" in text and not any(f"{v}_LIBTOOL_PATCH = NO" in text for v in own)
                and not any(f"{v}_AUTORECONF = YES" in text for v in own)):
            lines.append(f"{m[1]}_POST_RSYNC_HOOKS += LIBTOOL_PATCH_HOOK")
    return lines


def main():
    info = json.load(open(os.path.join(OUT, "show-info.json")))
    by_hash, by_pkg = debian_index()
    given_list = read_list()
    # One line per distinct download; the packages sharing it (host and
    # target, linux and its headers) share its override.
    downloads = {}
    for name, pkg in sorted(info.items()):
        for dl in pkg.get("downloads") or []:
            key = (pkg["dl_dir"], dl["source"])
            downloads.setdefault(key, {"pkg": pkg, "uri": (dl["uris"] or [""])[0], "users": []})
            downloads[key]["users"].append(name)
    manifest, local_mk = [], []
    for (dl_dir, source), d in sorted(downloads.items()):
        pkg, uri, users = d["pkg"], d["uri"], d["users"]
        version = pkg.get("version", "")
        site_file = os.path.join(SITE, dl_dir, source)
        os.makedirs(os.path.dirname(site_file), exist_ok=True)
        want = expected_hash(pkg, source)
        origin = check = None
        listed = [given_list[u] for u in users if u in given_list]
        main_source = source == (pkg.get("downloads") or [{}])[0].get("source")
        if listed and not main_source and listed[0][0] != "archive":
            # An extra download (gettext-tiny's gettext): in the tree made.
            manifest.append("\t".join([",".join(users), version, source, "given: part of the source tree made "
                                        "for " + users[0], "overridden: given as a source tree", want or ""]))
            continue
        if listed and not any(u in OVERRIDES for u in users):
            origin, check, dest = given_source(listed[0], pkg, dl_dir, version, source, site_file, want, by_pkg,
                                               local_mk)
            for u in overridden(users) if dest else []:
                local_mk.append(f"{var(u)}_OVERRIDE_SRCDIR = {dest}")
            manifest.append("\t".join([",".join(users), version, source, origin, check, want or ""]))
            continue
        if uri.startswith("local+"):
            origin, check = "local: the tree itself", "local (no download)"
        elif "rust-bin" in users[0] or any(u == "host-rust-bin" for u in users):
            origin = "system rustc/cargo " + subprocess.run(
                [os.environ["RUSTC"], "--version"], capture_output=True, text=True).stdout.split()[1]
            check = "overridden: static.rust-lang.org unreachable"
            line = "HOST_RUST_BIN_OVERRIDE_SRCDIR = " + rust_shim(
                [dl["source"] for dl in info["host-rust-bin"]["downloads"]])
            if line not in local_mk:
                local_mk.append(line)
        elif any(u in OVERRIDES for u in users):
            pass  # a source tree given for the package wins, below
        elif os.path.exists(site_file) and want and sha256(site_file) == want:
            origin, check = "site (earlier run)", "hash"
            if os.path.exists(site_file + ".origin"):
                origin = open(site_file + ".origin").read().strip()
            elif want in by_hash:
                origin = "Debian " + "/".join(by_hash[want][0])
            elif "files.pythonhosted.org" in uri:
                origin = "PyPI"
        if origin is None and not any(u in OVERRIDES for u in users):
            for ldir in LOCAL:
                cand = os.path.join(ldir, source)
                if os.path.exists(cand) and want and sha256(cand) == want:
                    shutil.copy(cand, site_file)
                    origin, check = "given tarball " + cand, "hash"
                    break
        given_tree = any(u in OVERRIDES for u in users)
        if origin is None and "files.pythonhosted.org" in uri and want and not given_tree:
            url = uri.split("+", 1)[1] + "/" + source
            fetch(url, site_file)
            if sha256(site_file) == want:
                origin, check = "PyPI", "hash"
            else:
                os.unlink(site_file)
        for directory, name in by_hash.get(want, []) if origin is None and not any(
                u in OVERRIDES for u in users) else []:
            try:
                fetch(f"{MIRROR}/{directory}/{name}", site_file)
            except OSError as e:
                print(f"{source}: {MIRROR}/{directory}/{name}: {e}")
                continue
            origin, check = f"Debian {directory}/{name}", "hash"
            break
        if check == "hash" and not origin.startswith("site") and not os.path.exists(site_file + ".origin"):
            with open(site_file + ".origin", "w") as f:
                f.write(origin + "\n")
        # An extra download (gettext-tiny's gettext) cannot be overridden on
        # its own: the package's source override must provide it.
        main_source = source == (pkg.get("downloads") or [{}])[0].get("source")
        if origin is None and not main_source:
            given = [u for u in users if u in OVERRIDES]
            if given:
                origin = f"given: part of the source tree given for {given[0]}"
                check = "overridden: given as a source tree"
            else:
                origin, check = "missing", "missing (an extra download: give it under its name)"
        if origin is None:
            given = [OVERRIDES[u] for u in users if u in OVERRIDES]
            if given:
                # A copy, with Buildroot's patches.
                dest = os.path.join(SRC, f"{dl_dir}-{version}")
                mark = os.path.join(dest, ".offline-given")
                if not (os.path.exists(mark) and open(mark).read() == given[0]):
                    shutil.rmtree(dest, ignore_errors=True)
                    shutil.copytree(given[0], dest, symlinks=True)
                    apply_patches(dest, patches_of(pkg))
                    with open(mark, "w") as f:
                        f.write(given[0])
                origin = "given source " + given[0] + ", Buildroot's patches applied"
                check = "overridden: given as a source tree"
                for u in overridden(users):
                    local_mk.append(f"{var(u)}_OVERRIDE_SRCDIR = {dest}")
        if origin is None:
            deb = debian_name(dl_dir, version)
            upstream = re.sub(r"^v", "", version)
            cands = by_pkg.get(deb, [])
            exact = [c for c in cands if upstream_of(c[0]) == upstream]
            # Else the newest of the same series (a stable update).
            same = sorted((c for c in cands if series(upstream_of(c[0])) == series(upstream)),
                          key=lambda c: vkey(upstream_of(c[0])), reverse=True)
            # Last, the newest of the same major version (a library's
            # compatible release: mpfr 4.2 for 4.1).
            major = sorted((c for c in cands if upstream_of(c[0]).split(".")[0] == upstream.split(".")[0]
                            and vkey(upstream_of(c[0])) > vkey(upstream)),
                           key=lambda c: vkey(upstream_of(c[0])), reverse=True)
            # DEBIAN_VERSIONS names Debian's version to take for a package.
            chosen = [c for c in cands for u in users if PINNED.get(u) == c[0]]
            if chosen:
                exact, same, major = chosen[:1], [], []
            for dver, directory, files in exact + same + major:
                origs = [f for f in files if ".orig.tar." in f[2] and not f[2].endswith(".asc")
                         and ".orig-" not in f[2]]
                if not origs:
                    continue
                name = origs[0][2]
                tarball = os.path.join(OFFLINE, "debian", name)
                os.makedirs(os.path.dirname(tarball), exist_ok=True)
                if not os.path.exists(tarball):
                    try:
                        fetch(f"{MIRROR}/{directory}/{name}", tarball)
                    except OSError as e:
                        print(f"{source}: {MIRROR}/{directory}/{name}: {e}")
                        continue
                dest = os.path.join(SRC, f"{dl_dir}-{version}")
                try:
                    unpack_with_patches(tarball, dest, patches_of(pkg))
                    debian_repack_fixup(dl_dir, dest)
                    generate_configure(dest)
                except (subprocess.CalledProcessError, tarfile.TarError) as e:
                    print(f"{dl_dir}: Debian's {name} with Buildroot's patches: {e}")
                    continue
                origin = f"Debian {directory}/{name} (Debian {dver}), Buildroot's patches applied"
                check = ("overridden: same version, other bytes" if upstream_of(dver) == upstream
                         else f"overridden: other version {upstream_of(dver)}")
                for u in overridden(users):
                    local_mk.append(f"{var(u)}_OVERRIDE_SRCDIR = {dest}")
                break
        if origin is None:
            origin, check = "missing", "missing"
        manifest.append("\t".join([",".join(users), version, source, origin, check, want or ""]))
    with open(os.path.join(OUT, "sources-manifest.tsv"), "w") as f:
        f.write("# packages\tversion\tfile\torigin\tcheck\tBuildroot's sha256\n")
        f.write("\n".join(manifest) + "\n")
    local_mk += libtool_patches(info, local_mk)
    # host-ccache's own patch hook points its cache at BR2_CCACHE_DIR; a
    # source override skips the patch step, so it runs after the copy
    # (without it the cache went to ~/.cache/ccache).
    if "HOST_CCACHE_OVERRIDE_SRCDIR" in "\n".join(local_mk):
        local_mk.append("HOST_CCACHE_POST_RSYNC_HOOKS += HOST_CCACHE_PATCH_CONFIGURATION")
    with open(os.path.join(OUT, "local.mk"), "w") as f:
        f.write("# Sources used instead of downloads (scripts/buildroot-offline).\n")
        f.write("\n".join(local_mk) + "\n")
    counts, missing = {}, 0
    for line in manifest:
        f = line.split("\t")
        if f[4].startswith("missing"):
            missing += 1
            continue
        k = (f[3].split()[0].rstrip(":"), f[4].split(":")[0])
        counts[k] = counts.get(k, 0) + 1
    for (origin, check), n in sorted(counts.items()):
        print(f"{n:4} {origin:10} {check}")
    # Said when none is, too: the line a reader looks for.
    print(f"missing: {missing}" + (" (the manifest's lines with check \"missing\")" if missing else ""))


if sys.argv[1:2] == ["fixup"]:
    debian_repack_fixup(sys.argv[2], sys.argv[3])
else:
    main()
