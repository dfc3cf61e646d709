/* SPDX-License-Identifier: MIT */
/*
 * The HAND entries of symbols.def for libibumad.so.3: its five string
 * functions. Like ibv_wc_status_str in hand_str.c, each forwards to the bound
 * function when libibumad is loaded and otherwise answers itself, with the
 * strings libibumad returns (the same in rdma-core 33.2, 44.0, 56.1 and
 * 65.0), so a program can still print a MAD it holds. The tables are indexed
 * by the constants of umad_types.h, umad_sm.h, umad_sa.h and umad_cm.h; a
 * value outside them gets libibumad's fallback answer, quirks included
 * ("<unknown" for a method, "Success" for a common status with an unnamed
 * invalid-field code). Compiled in both modes, like stubs.c.
 */
#include <stddef.h>
#include <stdint.h>

#include <infiniband/umad.h>
#include <infiniband/umad_cm.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sm.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

#include "internal.h"

#define RDMADL_COUNT(table) (sizeof(table) / sizeof((table)[0]))

/* A MAD field in network byte order, whatever the host's order. */
static unsigned from_be16(__be16 value) {
  const unsigned char *b = (const unsigned char *)&value;
  return (unsigned)b[0] << 8 | b[1];
}

/* TABLE[index] when TABLE names it, else NULL. */
static const char *lookup(const char *const *table, size_t n, unsigned index) {
  return index < n ? table[index] : NULL;
}

/* Management classes. The vendor and application ranges are answered apart. */
static const char *const class_names[] = {
    [UMAD_CLASS_SUBN_LID_ROUTED] = "Subn",
    [UMAD_CLASS_SUBN_DIRECTED_ROUTE] = "Subn",
    [UMAD_CLASS_SUBN_ADM] = "SubnAdm",
    [UMAD_CLASS_PERF_MGMT] = "Perf",
    [UMAD_CLASS_BM] = "BM",
    [UMAD_CLASS_DEVICE_MGMT] = "DevMgt",
    [UMAD_CLASS_CM] = "ComMgt",
    [UMAD_CLASS_SNMP] = "SNMP",
    [UMAD_CLASS_DEVICE_ADM] = "DevAdm",
    [UMAD_CLASS_BOOT_MGMT] = "BootMgt",
    [UMAD_CLASS_BIS] = "BIS",
    [UMAD_CLASS_CONG_MGMT] = "CongestionManagment", /* sic, as libibumad spells it */
};

static const char *class_str(uint8_t mgmt_class) {
  const char *s = lookup(class_names, RDMADL_COUNT(class_names), mgmt_class);
  if (s)
    return s;
  if ((mgmt_class >= UMAD_CLASS_VENDOR_RANGE1_START &&
       mgmt_class <= UMAD_CLASS_VENDOR_RANGE1_END) ||
      (mgmt_class >= UMAD_CLASS_VENDOR_RANGE2_START && mgmt_class <= UMAD_CLASS_VENDOR_RANGE2_END))
    return "Vendor";
  if (mgmt_class >= UMAD_CLASS_APPLICATION_START && mgmt_class <= UMAD_CLASS_APPLICATION_END)
    return "Application";
  return "<unknown>";
}

/* Methods every class shares; the SA adds its own. */
static const char *const common_method_names[] = {
    [UMAD_METHOD_GET] = "Get",
    [UMAD_METHOD_SET] = "Set",
    [UMAD_METHOD_GET_RESP] = "GetResp",
    [UMAD_METHOD_SEND] = "Send",
    [UMAD_METHOD_TRAP] = "Trap",
    [UMAD_METHOD_REPORT] = "Report",
    [UMAD_METHOD_REPORT_RESP] = "ReportResp",
    [UMAD_METHOD_TRAP_REPRESS] = "TrapRepress",
};

static const char *const sa_method_names[] = {
    [UMAD_SA_METHOD_GET_TABLE] = "GetTable",
    [UMAD_SA_METHOD_GET_TABLE_RESP] = "GetTableResp",
    [UMAD_SA_METHOD_DELETE] = "Delete",
    [UMAD_SA_METHOD_DELETE_RESP] = "DeleteResp",
    [UMAD_SA_METHOD_GET_MULTI] = "GetMulti",
    [UMAD_SA_METHOD_GET_MULTI_RESP] = "GetMultiResp",
    [UMAD_SA_METHOD_GET_TRACE_TABLE] = "GetTraceTable",
};

static const char *method_str(uint8_t mgmt_class, uint8_t method) {
  const char *s = NULL;
  if (mgmt_class == UMAD_CLASS_SUBN_ADM)
    s = lookup(sa_method_names, RDMADL_COUNT(sa_method_names), method);
  if (!s)
    s = lookup(common_method_names, RDMADL_COUNT(common_method_names), method);
  return s ? s : "<unknown"; /* sic: libibumad's answer has no closing '>' */
}

/* Attributes every class shares; SM, SA and CM add their own. */
static const char *const common_attr_names[] = {
    [UMAD_ATTR_CLASS_PORT_INFO] = "Class Port Info",
    [UMAD_ATTR_NOTICE] = "Notice",
    [UMAD_ATTR_INFORM_INFO] = "Inform Info",
};

static const char *const sm_attr_names[] = {
    [UMAD_SM_ATTR_NODE_DESC] = "NodeDescription",
    [UMAD_SM_ATTR_NODE_INFO] = "NodeInfo",
    [UMAD_SM_ATTR_SWITCH_INFO] = "SwitchInfo",
    [UMAD_SM_ATTR_GUID_INFO] = "GUIDInfo",
    [UMAD_SM_ATTR_PORT_INFO] = "PortInfo",
    [UMAD_SM_ATTR_PKEY_TABLE] = "P_KeyTable",
    [UMAD_SM_ATTR_SLVL_TABLE] = "SLtoVLMappingTable",
    [UMAD_SM_ATTR_VL_ARB_TABLE] = "VLArbitrationTable",
    [UMAD_SM_ATTR_LINEAR_FT] = "LinearForwardingTable",
    [UMAD_SM_ATTR_RANDOM_FT] = "RandomForwardingTable",
    [UMAD_SM_ATTR_MCAST_FT] = "MulticastForwardingTable",
    [UMAD_SM_ATTR_LINK_SPD_WIDTH_TABLE] = "LinkSpeedWidthPairsTable",
    [UMAD_SM_ATTR_VENDOR_MADS_TABLE] = "VendorSpecificMadsTable",
    [UMAD_SM_ATTR_HIERARCHY_INFO] = "HierarchyInfo",
    [UMAD_SM_ATTR_SM_INFO] = "SMInfo",
    [UMAD_SM_ATTR_VENDOR_DIAG] = "VendorDiag",
    [UMAD_SM_ATTR_LED_INFO] = "LedInfo",
    [UMAD_SM_ATTR_CABLE_INFO] = "CableInfo",
    [UMAD_SM_ATTR_PORT_INFO_EXT] = "PortInfoExtended",
};

static const char *const sa_attr_names[] = {
    [UMAD_SA_ATTR_NODE_REC] = "NodeRecord",
    [UMAD_SA_ATTR_PORT_INFO_REC] = "PortInfoRecord",
    [UMAD_SA_ATTR_SLVL_REC] = "SLtoVLMappingTableRecord",
    [UMAD_SA_ATTR_SWITCH_INFO_REC] = "SwitchInfoRecord",
    [UMAD_SA_ATTR_LINEAR_FT_REC] = "LinearForwardingTableRecord",
    [UMAD_SA_ATTR_RANDOM_FT_REC] = "RandomForwardingTableRecord",
    [UMAD_SA_ATTR_MCAST_FT_REC] = "MulticastForwardingTableRecord",
    [UMAD_SA_ATTR_SM_INFO_REC] = "SMInfoRecord",
    [UMAD_SA_ATTR_LINK_SPD_WIDTH_TABLE_REC] = "LinkSpeedWidthPairsTableRecord",
    [UMAD_SA_ATTR_LINK_REC] = "LinkRecord",
    [UMAD_SA_ATTR_GUID_INFO_REC] = "GuidInfoRecord",
    [UMAD_SA_ATTR_SERVICE_REC] = "ServiceRecord",
    [UMAD_SA_ATTR_PKEY_TABLE_REC] = "P_KeyTableRecord",
    [UMAD_SA_ATTR_PATH_REC] = "PathRecord",
    [UMAD_SA_ATTR_VL_ARB_REC] = "VLArbitrationTableRecord",
    [UMAD_SA_ATTR_MCMEMBER_REC] = "MCMemberRecord",
    [UMAD_SA_ATTR_TRACE_REC] = "TraceRecord",
    [UMAD_SA_ATTR_MULTI_PATH_REC] = "MultiPathRecord",
    [UMAD_SA_ATTR_SERVICE_ASSOC_REC] = "ServiceAssociationRecord",
    [UMAD_SA_ATTR_HIERARCHY_INFO_REC] = "HierarchyInfoRecord",
    [UMAD_SA_ATTR_CABLE_INFO_REC] = "CableInfoRecord",
    [UMAD_SA_ATTR_PORT_INFO_EXT_REC] = "PortInfoExtendedRecord",
    [UMAD_SA_ATTR_INFORM_INFO_REC] = "InformInfoRecord",
};

static const char *const cm_attr_names[] = {
    [UMAD_CM_ATTR_REQ] = "ConnectRequest",
    [UMAD_CM_ATTR_MRA] = "MsgRcptAck",
    [UMAD_CM_ATTR_REJ] = "ConnectReject",
    [UMAD_CM_ATTR_REP] = "ConnectReply",
    [UMAD_CM_ATTR_RTU] = "ReadyToUse",
    [UMAD_CM_ATTR_DREQ] = "DisconnectRequest",
    [UMAD_CM_ATTR_DREP] = "DisconnectReply",
    [UMAD_CM_ATTR_SIDR_REQ] = "ServiceIDResReq",
    [UMAD_CM_ATTR_SIDR_REP] = "ServiceIDResReqResp",
    [UMAD_CM_ATTR_LAP] = "LoadAlternatePath",
    [UMAD_CM_ATTR_APR] = "AlternatePathResponse",
    [UMAD_CM_ATTR_SAP] = "SuggestAlternatePath",
    [UMAD_CM_ATTR_SPR] = "SuggestPathResponse",
};

static const char *attribute_str(uint8_t mgmt_class, __be16 attr_id) {
  unsigned id = from_be16(attr_id);
  const char *s = NULL;
  switch (mgmt_class) {
  case UMAD_CLASS_SUBN_LID_ROUTED:
  case UMAD_CLASS_SUBN_DIRECTED_ROUTE:
    s = lookup(sm_attr_names, RDMADL_COUNT(sm_attr_names), id);
    break;
  case UMAD_CLASS_SUBN_ADM:
    s = lookup(sa_attr_names, RDMADL_COUNT(sa_attr_names), id);
    break;
  case UMAD_CLASS_CM:
    s = lookup(cm_attr_names, RDMADL_COUNT(cm_attr_names), id);
    break;
  }
  if (!s)
    s = lookup(common_attr_names, RDMADL_COUNT(common_attr_names), id);
  return s ? s : "<unknown>";
}

/* The invalid-field codes of the common status (bits 2-4, after the >> 2). */
static const char *const invalid_field_names[] = {
    [UMAD_STATUS_BAD_VERSION >> 2] = "Bad Version",
    [UMAD_STATUS_METHOD_NOT_SUPPORTED >> 2] = "Method not supported",
    [UMAD_STATUS_ATTR_NOT_SUPPORTED >> 2] = "Method/Attribute combo not supported",
    [UMAD_STATUS_INVALID_ATTR_VALUE >> 2] = "Invalid attribute/modifier field",
};

static const char *common_mad_status_str(__be16 status) {
  unsigned s = from_be16(status);
  if (s & UMAD_STATUS_BUSY)
    return "Busy";
  if (s & UMAD_STATUS_REDIRECT)
    return "Redirection required";
  const char *name = lookup(invalid_field_names, RDMADL_COUNT(invalid_field_names),
                            (s & UMAD_STATUS_INVALID_FIELD_MASK) >> 2);
  return name ? name : "Success";
}

/* The SA's class-specific status (the high byte). */
static const char *const sa_status_names[] = {
    [UMAD_SA_STATUS_SUCCESS] = "Success",
    [UMAD_SA_STATUS_NO_RESOURCES] = "No Resources",
    [UMAD_SA_STATUS_REQ_INVALID] = "Request Invalid",
    [UMAD_SA_STATUS_NO_RECORDS] = "No Records",
    [UMAD_SA_STATUS_TOO_MANY_RECORDS] = "Too Many Records",
    [UMAD_SA_STATUS_INVALID_GID] = "Invalid GID",
    [UMAD_SA_STATUS_INSUF_COMPS] = "Insufficient Components",
    [UMAD_SA_STATUS_REQ_DENIED] = "Request Denied",
    [UMAD_SA_STATUS_PRI_SUGGESTED] = "Priority Suggested",
};

static const char *sa_mad_status_str(__be16 status) {
  unsigned s = from_be16(status);
  const char *name =
      lookup(sa_status_names, RDMADL_COUNT(sa_status_names), (s & UMAD_STATUS_CLASS_MASK) >> 8);
  return name ? name : "Undefined Error";
}

/* Same contract as umad_class_str(3): the class's name, never NULL. */
RDMADL_STUB_API const char *RDMADL_NAME(umad_class_str)(uint8_t mgmt_class) {
  __typeof__(&umad_class_str) f = RDMADL_FN(umad_class_str);
  return f ? f(mgmt_class) : class_str(mgmt_class);
}

/* Same contract as umad_method_str(3): the method's name in MGMT_CLASS. */
RDMADL_STUB_API const char *RDMADL_NAME(umad_method_str)(uint8_t mgmt_class, uint8_t method) {
  __typeof__(&umad_method_str) f = RDMADL_FN(umad_method_str);
  return f ? f(mgmt_class, method) : method_str(mgmt_class, method);
}

/* Same contract as umad_attribute_str(3): ATTR_ID (network order) named
 * within MGMT_CLASS. */
RDMADL_STUB_API const char *RDMADL_NAME(umad_attribute_str)(uint8_t mgmt_class, __be16 attr_id) {
  __typeof__(&umad_attribute_str) f = RDMADL_FN(umad_attribute_str);
  return f ? f(mgmt_class, attr_id) : attribute_str(mgmt_class, attr_id);
}

/* Same contract as umad_common_mad_status_str(3): STATUS in network order. */
RDMADL_STUB_API const char *RDMADL_NAME(umad_common_mad_status_str)(__be16 status) {
  __typeof__(&umad_common_mad_status_str) f = RDMADL_FN(umad_common_mad_status_str);
  return f ? f(status) : common_mad_status_str(status);
}

/* Same contract as umad_sa_mad_status_str(3): STATUS in network order. */
RDMADL_STUB_API const char *RDMADL_NAME(umad_sa_mad_status_str)(__be16 status) {
  __typeof__(&umad_sa_mad_status_str) f = RDMADL_FN(umad_sa_mad_status_str);
  return f ? f(status) : sa_mad_status_str(status);
}
