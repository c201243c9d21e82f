"""The client's classes (hutch/_async is the source hutch/_sync is generated from)."""

from ._box import AsyncBox, AsyncFiles, AsyncFileStream, AsyncBoxPolicy, AsyncPorts, AsyncProcesses
from ._client import (AsyncBoxes, AsyncClient, AsyncKeys, AsyncRegistries, AsyncSecrets,
                      AsyncTemplates)
from ._exec import AsyncExecSession

__all__ = ["AsyncBox", "AsyncBoxes", "AsyncClient", "AsyncExecSession", "AsyncFiles",
           "AsyncFileStream", "AsyncKeys", "AsyncBoxPolicy", "AsyncPorts", "AsyncProcesses",
           "AsyncRegistries", "AsyncSecrets", "AsyncTemplates"]
