// A notebook client for tests (kernel.jupyter.test.ts here, the site suite on the box): the real
// jupyter_client started with `python -c JUPYTER_DRIVER <kernels dir> <kernel name> <cell> <timeout s>`.
// Starts the kernel by name from the kernels dir alone, runs one cell, prints its stdout and stderr
// streams (and its error, if any) as JSON, and always shuts the kernel down. Every wait is bounded.
export const JUPYTER_DRIVER = String.raw`import json
import sys

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

kernels_dir, name, code, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
km = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels_dir]))
km.start_kernel()
result = {"argv": km.kernel_spec.argv, "display_name": km.kernel_spec.display_name}
try:
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=timeout)
    msg_id = kc.execute(code)
    out = {"stdout": [], "stderr": []}
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            out[msg["content"]["name"]].append(msg["content"]["text"])
        elif kind == "error":
            result["error"] = msg["content"]["ename"] + ": " + msg["content"]["evalue"]
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    result.update({stream: "".join(texts) for stream, texts in out.items()})
    kc.stop_channels()
finally:
    km.shutdown_kernel(now=True)
print(json.dumps(result))
`;
