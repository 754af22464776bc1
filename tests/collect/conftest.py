from __future__ import annotations

import sys
from pathlib import Path

# ragserver.py and collect_helpers.py sit next to the tests
sys.path.insert(0, str(Path(__file__).parent))
