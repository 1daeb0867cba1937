# airlock bench helper: a local Jupyter kernel (jupyter_client + ipykernel, this interpreter).
# usage: jupyter.py MODE N ; prints one JSON line {"samples": [...]} or {"error": "..."}.
# MODE: run (ms per execute round trip of print(1) in one live kernel, output received),
# start (ms from starting a kernel to the first print(1)'s output, a new kernel each time).
import json, sys, time

MODE, N = sys.argv[1], int(sys.argv[2])


def execute(kc):
    out = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])

    reply = kc.execute_interactive("print(1)", output_hook=hook, timeout=30)
    if reply["content"]["status"] != "ok" or "".join(out) != "1\n":
        raise RuntimeError(f"kernel answered {reply['content']['status']} {out!r}")


def main():
    try:
        from jupyter_client.manager import start_new_kernel
        import ipykernel  # noqa: F401  (the kernel the native spec starts)
    except ImportError as e:
        return {"error": f"not installed ({e.name})"}
    samples = []
    if MODE == "run":
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            for _ in range(5):
                execute(kc)
            for _ in range(N):
                t = time.perf_counter()
                execute(kc)
                samples.append((time.perf_counter() - t) * 1e3)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    elif MODE == "start":
        for _ in range(N):
            t = time.perf_counter()
            km, kc = start_new_kernel(kernel_name="python3")
            execute(kc)
            samples.append((time.perf_counter() - t) * 1e3)
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    else:
        return {"error": f"unknown mode {MODE}"}
    return {"samples": samples}


print(json.dumps(main()))
