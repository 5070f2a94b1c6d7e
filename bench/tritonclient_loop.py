"""The peer of bench/remote.ts: NVIDIA's Python tritonclient in a closed loop.

CONCURRENCY threads, each with its own client, send identity requests
(FP32 [1, SIZE], binary tensors) for WINDOW seconds; prints one JSON line:
{"requests": n, "seconds": s, "p99_us": p, "cpu_seconds": c} (c: this
process's CPU time, all threads, during the window). A CA file after the
window: gRPC over TLS, trusting it. COMPRESSION=gzip in the environment:
requests compressed (gRPC compression_algorithm; HTTP request and response
compression).

    python3 bench/tritonclient_loop.py grpc 127.0.0.1:8001 identity_fp32 16 16 2.0 [ca.pem]
"""
import json
import os
import sys
import threading
import time

import numpy as np


def main():
    protocol, url, model, size, concurrency, window = sys.argv[1:7]
    ca = sys.argv[7] if len(sys.argv) > 7 else None
    tls = {} if ca is None else {"ssl": True, "root_certificates": ca}
    size, concurrency, window = int(size), int(concurrency), float(window)
    if protocol == "grpc":
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module
    data = np.arange(size, dtype=np.float32).reshape(1, size)
    compression = os.environ.get("COMPRESSION", "none")
    options = {}
    if compression != "none":
        options = {"compression_algorithm": compression} if protocol == "grpc" else {
            "request_compression_algorithm": compression, "response_compression_algorithm": compression}
    latencies = []
    lock = threading.Lock()
    start_barrier = threading.Barrier(concurrency + 1)

    def loop():
        client = client_module.InferenceServerClient(url, **tls)
        tensor = client_module.InferInput("INPUT0", [1, size], "FP32")
        tensor.set_data_from_numpy(data)
        output = client_module.InferRequestedOutput("OUTPUT0")
        client.infer(model, [tensor], outputs=[output], **options)  # warm-up
        mine = []
        start_barrier.wait()
        while time.perf_counter() < end[0]:
            started = time.perf_counter()
            result = client.infer(model, [tensor], outputs=[output], **options)
            result.as_numpy("OUTPUT0")
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    end = [0.0]
    threads = [threading.Thread(target=loop) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    begun = time.perf_counter()
    end[0] = begun + 3600
    start_barrier.wait()
    begun = time.perf_counter()
    cpu_begun = time.process_time()
    end[0] = begun + window
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - begun
    cpu_seconds = time.process_time() - cpu_begun
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else 0
    print(json.dumps({"requests": len(latencies), "seconds": seconds, "p99_us": round(p99 * 1e6), "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    main()
