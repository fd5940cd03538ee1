"""The shipped notebooks open unmodified in JupyterLab (issue 19, item 11): JupyterLab writes the kernel's own
kernelspec and language_info into a notebook when its kernel starts, so a notebook shipped without them opens
as modified (and would be saved with a diff the user never made)."""

import json

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from servebook.util.paths import project_root

# the templates the package ships, and the copies of them in notebooks/ that JupyterLab opens
NOTEBOOKS = sorted((project_root() / "notebooks").glob("*.ipynb")) + \
    sorted((project_root() / "lib" / "servebook" / "data" / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(project_root()).as_posix())
def test_a_shipped_notebook_carries_what_its_kernel_reports(path):
    notebook = json.loads(path.read_text())
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert notebook["metadata"]["kernelspec"] == {"display_name": spec.display_name, "language": spec.language,
                                                  "name": "python3"}
    info = notebook["metadata"]["language_info"]
    assert {"codemirror_mode", "file_extension", "mimetype", "name", "nbconvert_exporter", "pygments_lexer",
            "version"} <= set(info)
    assert all(c.get("id") for c in notebook["cells"]) and notebook["nbformat_minor"] >= 5
    assert all(c.get("execution_count") is None and not c.get("outputs") for c in notebook["cells"]
               if c["cell_type"] == "code")  # shipped clean
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
