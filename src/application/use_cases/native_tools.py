from collections.abc import Sequence

from domain.native_tools import NATIVE_TOOLS, NativeToolSpec


class ListNativeTools:
    """The native tool types an agent may reference."""

    async def execute(self) -> Sequence[NativeToolSpec]:
        return NATIVE_TOOLS
