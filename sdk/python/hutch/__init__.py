"""Python SDK for hutchd: small VMs ("boxes") for AI coding agents.

    from hutch import Box

    with Box.create(memory="1G") as box:
        print(box.exec("uname -a").stdout)

``Client``/``Box`` are synchronous; ``AsyncClient``/``AsyncBox`` have the same methods as
coroutines. See README.md.
"""

from ._async import (
    AsyncBox,
    AsyncBoxes,
    AsyncBoxPolicy,
    AsyncClient,
    AsyncExecSession,
    AsyncFiles,
    AsyncFileStream,
    AsyncKeys,
    AsyncPorts,
    AsyncProcesses,
    AsyncRegistries,
    AsyncSecrets,
    AsyncTemplates,
)
from ._connection import DEFAULT_SOCKET, certificate_fingerprint
from ._errors import (
    AlreadyExistsError,
    ConnectError,
    FailedPreconditionError,
    FingerprintMismatchError,
    HutchCancelledError,
    HutchError,
    HutchTimeoutError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    ResourceExhaustedError,
    TLSError,
    UnauthenticatedError,
    UnavailableError,
    UnsupportedError,
)
from ._models import (
    Accel,
    BoxInfo,
    BoxShare,
    Caller,
    Checkpoint,
    ExecError,
    ExecResult,
    FileInfo,
    FileList,
    Info,
    Key,
    Policy,
    PolicyLog,
    PolicyLogEntry,
    Port,
    Process,
    RegistryLogin,
    Secret,
    Service,
    Template,
    TemplateBuild,
    TemplateDefaults,
    TemplateImage,
    TemplateStart,
)
from ._sync import (
    Box,
    BoxPolicy,
    Boxes,
    Client,
    ExecSession,
    Files,
    FileStream,
    Keys,
    Ports,
    Processes,
    Registries,
    Secrets,
    Templates,
)
from ._version import __version__

__all__ = [
    "Accel", "AlreadyExistsError", "AsyncBox", "AsyncBoxPolicy", "AsyncBoxes", "AsyncClient",
    "AsyncExecSession", "AsyncFileStream", "AsyncFiles", "AsyncKeys", "AsyncPorts",
    "AsyncProcesses", "AsyncRegistries", "AsyncSecrets", "AsyncTemplates", "Box", "BoxInfo", "BoxPolicy", "BoxShare", "Boxes",
    "Caller", "Checkpoint", "Client", "ConnectError", "DEFAULT_SOCKET", "ExecError",
    "ExecResult", "ExecSession", "FailedPreconditionError", "FileInfo", "FileList",
    "FileStream", "Files", "FingerprintMismatchError", "HutchCancelledError", "HutchError",
    "HutchTimeoutError", "Info", "InternalError", "InvalidArgumentError", "Key", "Keys",
    "NotFoundError", "PermissionDeniedError", "Policy", "PolicyLog", "PolicyLogEntry", "Port",
    "Ports", "Process", "Processes", "ProtocolError", "Registries", "RegistryLogin",
    "ResourceExhaustedError", "Secret",
    "Secrets", "Service", "TLSError", "Template", "TemplateBuild", "TemplateDefaults",
    "TemplateImage", "TemplateStart", "Templates", "UnauthenticatedError",
    "UnavailableError", "UnsupportedError", "__version__", "certificate_fingerprint",
]
