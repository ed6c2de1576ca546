__all__ = []

# %% ../nbs/30_cli.ipynb #0e98cde7
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())

# %% ../nbs/30_cli.ipynb #b70ab0b7
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())

# %% ../nbs/30_cli.ipynb #eaa044c0
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())

# %% ../nbs/30_cli.ipynb #e8b647b4
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())

# %% ../nbs/30_cli.ipynb #e8b647b4
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())

# %% ../nbs/30_cli.ipynb #48c2859f
import sys
from .cli import main
if __name__ == "__main__": sys.exit(main())