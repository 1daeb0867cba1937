"""Hostile images for the image tests, written by hand with Python's tarfile (not with
airlock's own tar code, so the two cannot agree on a mistake).

Usage: python3 hostile.py KIND OUT [--victim PATH] [--base ROOT_TAR]

KIND is one of the functions below; OUT is a tar file or, for the OCI kinds, a directory (an
OCI image layout). VICTIM is a host file the image tries to reach; BASE is a root tarball used
as the lower layer of the kinds that need a working system.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile


def entry(tar, name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link="", uid=0, dev=(0, 0)):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = uid
    info.mtime = 1700000000
    info.linkname = link
    info.devmajor, info.devminor = dev
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def open_tar(out, compress=False):
    if compress:
        return tarfile.open(out, "w:gz", format=tarfile.GNU_FORMAT, compresslevel=1)
    return tarfile.open(out, "w", format=tarfile.GNU_FORMAT)


def links(out, victim, **_):
    """Symlinks to the host's /etc/shadow and to the victim, then files written through them,
    a hard link to a link, and /etc/passwd as a link to /etc/shadow."""
    vdir, vname = os.path.split(victim)
    with open_tar(out) as t:
        entry(t, "etc/", tarfile.DIRTYPE, mode=0o755)
        entry(t, "etcl", tarfile.SYMTYPE, link="/etc")
        entry(t, "etcl/shadow", data=b"pwned-through-etcl\n")
        entry(t, "shadow", tarfile.SYMTYPE, link="/etc/shadow")
        entry(t, "shadow", data=b"pwned-replacing-link\n")
        entry(t, vdir.lstrip("/") + "/", tarfile.DIRTYPE, mode=0o755)
        entry(t, "up", tarfile.SYMTYPE, link="../../../../../../../.." + vdir)
        entry(t, "up/" + vname, data=b"pwned-through-up\n")
        entry(t, "abs", tarfile.SYMTYPE, link=victim)
        entry(t, "hl", tarfile.LNKTYPE, link="abs")
        entry(t, "etc/passwd", tarfile.SYMTYPE, link="/etc/shadow")


def dotdot(out, victim, **_):
    """A file whose path climbs out of the root."""
    with open_tar(out) as t:
        entry(t, "../../../../../../../.." + victim, data=b"pwned-dotdot\n")


def whiteout_dotdot(out, victim, **_):
    """A whiteout whose path climbs out of the root."""
    vdir, vname = os.path.split(victim)
    with open_tar(out) as t:
        entry(t, "../../../../../../../.." + vdir + "/.wh." + vname)


def device(out, **_):
    """A device node outside /dev."""
    with open_tar(out) as t:
        entry(t, "etc/", tarfile.DIRTYPE, mode=0o755)
        entry(t, "etc/evil-null", tarfile.CHRTYPE, mode=0o666, dev=(1, 3))


def dev_nodes(out, **_):
    """Device nodes under /dev, as mmdebstrap writes them: dropped, the import goes on."""
    with open_tar(out) as t:
        entry(t, "dev/", tarfile.DIRTYPE, mode=0o755)
        entry(t, "dev/null", tarfile.CHRTYPE, mode=0o666, dev=(1, 3))
        entry(t, "dev/sda", tarfile.BLKTYPE, mode=0o660, dev=(8, 0))
        entry(t, "etc/hostname", data=b"x\n")


def many(out, **_):
    """100 000 empty files in 100 directories."""
    with open_tar(out) as t:
        for d in range(100):
            entry(t, f"d{d:03}/", tarfile.DIRTYPE, mode=0o755)
            for f in range(1000):
                entry(t, f"d{d:03}/f{f:04}")


def bomb(out, **_):
    """A gzip of a tar holding 1 GiB of zeros (about 1 MiB compressed)."""
    info = tarfile.TarInfo("zeros")
    info.size = 1 << 30
    info.mode = 0o644
    with gzip.open(out, "wb", compresslevel=1) as z:
        z.write(info.tobuf(format=tarfile.GNU_FORMAT))
        chunk = bytes(1 << 20)
        for _ in range(1 << 10):
            z.write(chunk)
        z.write(bytes(1024))


def deep(out, **_):
    """A path 200 directories deep."""
    with open_tar(out) as t:
        entry(t, "/".join(["a"] * 200) + "/f", data=b"x")


def long_name(out, **_):
    """A path component of 300 bytes."""
    with open_tar(out) as t:
        entry(t, "x" * 300, data=b"x")


# --- OCI layouts (directories) -----------------------------------------------------------


def blob(layout, data=None, path=None):
    """Adds a blob (bytes, or a file hard-linked or copied in) and returns its descriptor."""
    if path is not None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest, size = h.hexdigest(), os.path.getsize(path)
        dst = os.path.join(layout, "blobs", "sha256", digest)
        if not os.path.exists(dst):
            try:
                os.link(path, dst)
            except OSError:
                shutil.copyfile(path, dst)
    else:
        digest, size = hashlib.sha256(data).hexdigest(), len(data)
        with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
            f.write(data)
    return {"digest": "sha256:" + digest, "size": size}


def diff_id(path):
    h = hashlib.sha256()
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def oci(out, layers, env=None, workdir=""):
    """An OCI layout at `out` with these layer tar files (lowest first)."""
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    descs = []
    for path in layers:
        d = blob(out, path=path)
        gz = open(path, "rb").read(2) == b"\x1f\x8b"
        d["mediaType"] = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if gz else "")
        descs.append(d)
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": env or [], "WorkingDir": workdir},
              "rootfs": {"type": "layers", "diff_ids": [diff_id(p) for p in layers]}}
    cdesc = blob(out, json.dumps(config).encode())
    cdesc["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cdesc, "layers": descs}
    mdesc = blob(out, json.dumps(manifest).encode())
    mdesc["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [mdesc]}, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def whiteouts(out, victim, **_):
    """Two layers: the lower writes keep/a, gone/b, opq/c; the upper whites out gone/b, makes
    opq opaque (adding opq/d), and tries whiteouts of the host's victim through a symlink and
    by an absolute path."""
    vdir, vname = os.path.split(victim)
    os.makedirs(out)
    lower, upper = out + ".lower.tar", out + ".upper.tar"
    with open_tar(lower) as t:
        for p in ["keep/a", "gone/b", "opq/c"]:
            entry(t, p, data=p.encode())
    with open_tar(upper, compress=True) as t:
        entry(t, "gone/.wh.b")
        entry(t, "opq/.wh..wh..opq")
        entry(t, "opq/d", data=b"opq/d")
        entry(t, "t", tarfile.SYMTYPE, link=vdir)
        entry(t, "t/.wh." + vname)
        entry(t, vdir + "/.wh." + vname)
    oci(out, [lower, upper])
    os.remove(lower)
    os.remove(upper)


def on_base(out, base, build):
    """An OCI layout: `base` as the lower layer, the tar `build` writes on top."""
    os.makedirs(out)
    top = out + ".top.tar"
    with open_tar(top) as t:
        build(t)
    oci(out, [base, top], env=["PATH=/usr/local/bin:/usr/bin:/bin"])
    os.remove(top)


def setuid(out, base, **_):
    """Set-uid-root and set-gid copies of id(1) over the base."""
    data = open("/usr/bin/id", "rb").read()

    def build(t):
        entry(t, "usr/local/bin/suid-id", data=data, mode=0o4755, uid=0)
        entry(t, "usr/local/bin/sgid-id", data=data, mode=0o2755, uid=0)
    on_base(out, base, build)


def interp(out, base, **_):
    """A python3 of the image's own, first on its PATH, that reports its seccomp state on
    stderr, names itself as the interpreter when probed, and execs the real one."""
    script = (b"#!/bin/sh\n"
              b"grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status | tr '\\n' ' ' >&2\n"
              b"echo >&2\n"
              b"case \"$*\" in *airlock-bootstrap*)\n"
              b"  /usr/bin/python3 \"$@\" | sed 's#\"executable\": \"[^\"]*\"#\"executable\": \"/usr/local/bin/python3\"#'\n"
              b"  exit 0;;\n"
              b"esac\n"
              b"exec /usr/bin/python3 \"$@\"\n")

    def build(t):
        entry(t, "usr/local/bin/python3", data=script, mode=0o755)
    on_base(out, base, build)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind")
    p.add_argument("out")
    p.add_argument("--victim", default="/nonexistent/victim")
    p.add_argument("--base")
    a = p.parse_args()
    globals()[a.kind.replace("-", "_")](a.out, victim=a.victim, base=a.base)


if __name__ == "__main__":
    main()
