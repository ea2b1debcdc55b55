"""The calibration corpus: the models a device's cost table is fitted on, and validated
against one left out at a time (``layoutbench calibrate --validate``).

Families: the quick zoo; convolutional and mobile networks; ViTs and hybrids (``.unfused``
where that makes one partition, several partitions where the model has them); EdgeTAM's
parts; int8 variants that ET-VK runs; a synthetic model of three partitions; and seeded
``kernels:<seed>`` and ``convs:<seed>`` models, which sample the shapes the real ones leave out. Every one runs on
ET-VK 1.5.1: fastvit_t8, levit_128s, repvit_m1, timm:coat_lite_tiny and timm:efficientvit_b0
lower but do not (docs/gpu-time.md says why).
"""

from models._registry import add_to_zoo
from models.variants import FP16_SUFFIX, INT8_SUFFIX

CALIBRATION_CORPUS = (
    # the quick zoo
    "resnet18", "mobilenetv3_small_100", "deit_tiny_patch16_224.unfused", "mobilevit_xs.unfused",
    "edgetam_memory_attention", "synthetic_small",
    # convolutional and mobile networks
    "efficientnet_b0", "convnext_atto", "timm:mobilenetv2_100", "timm:ghostnet_100", "timm:regnetx_002",
    "timm:hgnetv2_b0", "timm:lcnet_100", "timm:resnet34",
    # ViTs and hybrids
    "vit_small_patch16_224.unfused", "tiny_vit_5m_224.unfused", "efficientformer_l1", "timm:mobilevitv2_050",
    "timm:mobilevitv2_075",
    # EdgeTAM's image encoder, int8 programs, several partitions
    "edgetam_image_encoder", "resnet18.int8", "mobilenetv3_small_100.int8", "mobilevit_xs.unfused.int8",
    "timm:resnet10t.int8", "timm:resnet26.int8", "timm:resnet34.int8", "timm:mobilenetv2_100.int8",
    "timm:efficientnet_b0.int8", "timm:mnasnet_100.int8", "timm:regnetx_002.int8",
    # int8 graphs of 16 to 26 MB of weights, across the size where the H100 runs the same
    # node slower (docs/gpu-time.md)
    "timm:resnet26d.int8", "timm:resnet26t.int8", "timm:seresnext26d_32x4d.int8",
    "timm:resnet32ts.int8", "timm:gernet_m.int8", "timm:resnet50.int8",
    "synthetic_partitioned",
    # shapes sampled over a wide range; the last five seeds draw feature maps of 159 to 223
    # pixels a side, which the first sixteen reach once (kernels:11)
    *(f"kernels:{seed}" for seed in (*range(16), 17, 27, 36, 44, 59)),
    # the convolutions ET-VK runs with its direct shader (grouped, dilated) at the timm catalog's sizes
    *(f"convs:{seed}" for seed in range(16)),
)

add_to_zoo("calibration", *CALIBRATION_CORPUS)
# Its float models computed in half precision (ET-VK's force_fp16), as phones run them.
add_to_zoo("calibration-fp16", *(name + FP16_SUFFIX for name in CALIBRATION_CORPUS if not name.endswith(INT8_SUFFIX)))
