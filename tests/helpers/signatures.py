"""Hand-built node signatures (as :func:`costmodel.signatures.signature` writes them) and
representations, for tests of what prices or names a node."""

TEXTURE_C, TEXTURE_W = "TEXTURE_3D/CHANNELS_PACKED", "TEXTURE_3D/WIDTH_PACKED"
BUFFER_W, BUFFER_C = "BUFFER/WIDTH_PACKED", "BUFFER/CHANNELS_PACKED"


def convolution(in_channels, out_channels, kernel, groups=1, stride=1, dilation=1, transposed=False, spatial=(32, 32),
                operator="aten.convolution.default"):
    """A convolution's signature: weight [C_out, C_in / groups, kh, kw] (transposed: [C_in, C_out / groups, ...])."""
    weight = [in_channels, out_channels // groups, *kernel] if transposed else [out_channels, in_channels // groups,
                                                                                  *kernel]
    return {"operator": operator, "args": [{"t": [1, in_channels, *spatial]}, {"w": weight}, {"w": [out_channels]},
                                           [stride] * 2, [0, 0], [dilation] * 2, transposed, [0, 0], groups],
            "kwargs": {}, "outputs": [[1, out_channels, *spatial]], "dtype": "float32"}


def node(operator, args, outputs, dtype="float32"):
    return {"operator": operator, "args": args, "kwargs": {}, "outputs": outputs, "dtype": dtype}
