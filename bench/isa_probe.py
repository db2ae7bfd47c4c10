"""Does ``--xla_cpu_max_isa`` change the code XLA generates in this jaxlib (issue 58)?

    python bench/isa_probe.py [ISA ...]    (default: none AVX512 AVX2 AVX SSE4_2 BOGUS)

For each value, a fresh process (XLA reads its flags at start, the compilation cache off) compiles one small
program (a matmul, tanh, exp, a row reduction) with ``--xla_dump_to`` and prints the sha256 of its result and
the count of AVX-512 (``zmm``), AVX (``ymm``) and FMA (``vfmadd``) instructions in the object code XLA
wrote (``objdump -d``), and the first warning XLA logged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = """
import hashlib, jax, jax.numpy as jnp, numpy as np
def f(a, b):
    x = jnp.tanh(a @ b)
    return jnp.log(jnp.exp(x).sum(-1)) + jnp.sin(x * 3.1).mean(-1)
a = jax.random.normal(jax.random.PRNGKey(0), (512, 384)); b = jax.random.normal(jax.random.PRNGKey(1), (384, 1000)) / 16
print(hashlib.sha256(np.asarray(jax.jit(f)(a, b)).tobytes()).hexdigest()[:16])
"""


def probe(isa: str | None) -> str:
    with tempfile.TemporaryDirectory() as dump:
        flags = f"--xla_dump_to={dump}" + (f" --xla_cpu_max_isa={isa}" if isa else "")
        env = {**os.environ, "XLA_FLAGS": flags, "MARL_COMPILATION_CACHE": "0", "JAX_PLATFORMS": "cpu"}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        p = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True)
        objs = [str(o) for o in Path(dump).glob("*jit_f*.o")]
        asm = subprocess.run(["objdump", "-d", *objs], capture_output=True, text=True, check=True).stdout
        warn = next((ln.split("] ", 1)[-1] for ln in p.stderr.splitlines() if "ISA" in ln), "")
        return (f"{isa or 'default':8s} result {p.stdout.strip()}  zmm {asm.count('zmm'):4d}  ymm {asm.count('ymm'):4d}  "
                f"vfmadd {asm.count('vfmadd'):3d}  {warn}")


if __name__ == "__main__":
    for v in sys.argv[1:] or [None, "AVX512", "AVX2", "AVX", "SSE4_2", "BOGUS"]:
        print(probe(v), flush=True)
