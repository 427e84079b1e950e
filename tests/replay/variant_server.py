"""The replay tests' modified server: `mcpbench.lab.peers.variant_server`, runnable by path. Run: python variant_server.py MODE"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcpbench.lab.peers.variant_server import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1])
