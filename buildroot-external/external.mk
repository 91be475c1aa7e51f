include $(sort $(wildcard $(BR2_EXTERNAL_CAMSTREAM_PATH)/../package/*/*.mk))
